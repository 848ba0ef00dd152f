package mirror

import (
	"strings"
	"testing"
)

// syncsFor plays a partition's acks (source offset -> target offset, in order) through
// the writer's rules and returns the syncs it would write, with a final position flush.
func syncsFor(acks [][2]int64) []OffsetSync {
	w := &offsetSyncWriter{queue: make(chan queuedSync, len(acks)+1)}
	p := &partitionState{topic: "t", partition: 0}
	for _, a := range acks {
		w.observe(p, nil, a[0], a[1])
	}
	w.parts = &partitionRegistry{parts: map[partitionKey]*partitionState{{"t", 0}: p}}
	w.flushPositions()
	close(w.queue)
	st := newOffsetSyncStore("x")
	for q := range w.queue {
		st.add(partitionKey{"t", 0}, q.sync)
	}
	return st.syncs[partitionKey{"t", 0}]
}

func TestTranslateOffset(t *testing.T) {
	// Source offsets 0..9 and 20..29 mirrored to 0..9 and 10..19 (10..19 filtered or
	// aborted); 30, 31 transaction markers; 32 mirrored to 20.
	var acks [][2]int64
	for s := int64(0); s < 10; s++ {
		acks = append(acks, [2]int64{s, s})
	}
	for s := int64(20); s < 30; s++ {
		acks = append(acks, [2]int64{s, s - 10})
	}
	acks = append(acks, [2]int64{32, 20})
	syncs := syncsFor(acks)
	if len(syncs) != 3 {
		t.Fatalf("syncs %+v: want one per delta change and none more (0, 20, 32)", syncs)
	}
	tests := map[string]struct {
		syncs     []OffsetSync
		committed int64
		want      int64
		exact, ok bool
	}{
		"before any sync":             {syncs, -1, 0, false, false},
		"on a sync":                   {syncs, 0, 0, true, true},
		"inside a run":                {syncs, 7, 7, true, true},
		"in the gap after a run":      {syncs, 15, 10, true, true},
		"right after a run":           {syncs, 10, 10, true, true},
		"second run":                  {syncs, 25, 15, true, true},
		"markers before the last":     {syncs, 31, 20, true, true},
		"past the last sync":          {syncs, 33, 21, false, true},
		"chain broken: safe side":     {[]OffsetSync{{0, 0, -1}, {20, 10, -1}}, 7, 1, false, true},
		"chain broken, on the second": {[]OffsetSync{{0, 0, -1}, {20, 10, -1}}, 20, 10, true, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, exact, ok := translateOffset(tc.syncs, tc.committed)
			if got != tc.want || exact != tc.exact || ok != tc.ok {
				t.Fatalf("translateOffset(%d) = %d exact %v ok %v, want %d exact %v ok %v", tc.committed, got, exact, ok, tc.want, tc.exact, tc.ok)
			}
		})
	}
}

func TestOffsetSyncStoreReplacesRewrittenStretch(t *testing.T) {
	st := newOffsetSyncStore("x")
	tp := partitionKey{"t", 0}
	for _, s := range []OffsetSync{{0, 0, -1}, {100, 100, 0}, {200, 200, 100}, {150, 260, -1}} {
		st.add(tp, s)
	}
	got := st.syncs[tp]
	if len(got) != 3 || got[2].SourceOffset != 150 || got[2].TargetOffset != 260 {
		t.Fatalf("store %+v: the sync of the records mirrored again must replace those at or above it", got)
	}
	// A group at 180 resumes after the second copy of 150: nothing skipped.
	if to, _, _ := translateOffset(got, 180); to != 261 {
		t.Fatalf("translated 180 to %d, want 261", to)
	}
}

func TestOffsetSyncEncoding(t *testing.T) {
	s := OffsetSync{SourceOffset: 1 << 40, TargetOffset: 7, Previous: -1}
	got, err := decodeOffsetSync(s.encode())
	if err != nil || got != s {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", s, got, err)
	}
	tp, err := parseOffsetSyncKey(offsetSyncKey("a.b/c-d", 12))
	if err != nil || tp != (partitionKey{"a.b/c-d", 12}) {
		t.Fatalf("key round trip = %+v, %v", tp, err)
	}
	if n := OffsetSyncTopic("kafka-mirror.default/orders"); n != "__kafka-mirror.offset-syncs.kafka-mirror.default_orders" {
		t.Fatalf("OffsetSyncTopic = %q", n)
	}
	if n := OffsetSyncTopic(strings.Repeat("g", 400)); len(n) != 249 {
		t.Fatalf("OffsetSyncTopic of a long group has %d characters, want 249", len(n))
	}
}

func TestObserveAllocatesNothing(t *testing.T) {
	w := &offsetSyncWriter{queue: make(chan queuedSync, 1)}
	p := &partitionState{topic: "t"}
	var src int64
	allocs := testing.AllocsPerRun(10000, func() {
		src++
		w.observe(p, nil, src, src)
		select {
		case <-w.queue:
		default:
		}
	})
	if allocs != 0 {
		t.Fatalf("observe allocated %v times per record", allocs)
	}
}

// BenchmarkOffsetSyncObserve is the ack path's cost of offset syncs per acked record in
// the steady state (same delta, a sync queued every offsetSyncEveryRecords records).
func BenchmarkOffsetSyncObserve(b *testing.B) {
	w := &offsetSyncWriter{queue: make(chan queuedSync, 1)}
	p := &partitionState{topic: "t"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w.observe(p, nil, int64(i), int64(i))
		if i%offsetSyncEveryRecords == 0 {
			select {
			case <-w.queue:
			default:
			}
		}
	}
}

// TestOffsetSyncStoreThinsOldSyncs fills a partition's store far past its bound: it
// stays bounded, recent offsets stay exact, and every old offset still translates
// without skipping a record (to at most its exact target offset).
func TestOffsetSyncStoreThinsOldSyncs(t *testing.T) {
	st := newOffsetSyncStore("x")
	tp := partitionKey{"t", 0}
	// Every 4th source offset filtered: a sync at each run start (3 records per run).
	const runs = 20 * maxOffsetSyncsPerPartition
	prev := int64(-1)
	for r := int64(0); r < runs; r++ {
		s := OffsetSync{SourceOffset: 4*r + 1, TargetOffset: 3 * r, Previous: prev}
		st.add(tp, s)
		prev = s.SourceOffset
	}
	syncs := st.syncs[tp]
	if len(syncs) > maxOffsetSyncsPerPartition {
		t.Fatalf("store holds %d syncs, bound %d", len(syncs), maxOffsetSyncsPerPartition)
	}
	exactTarget := func(c int64) int64 { // first mirrored record at or after c
		r := c / 4
		if c%4 == 0 {
			return 3 * r // c filtered: the run starting at c+1
		}
		return 3*r + c%4 - 1
	}
	for c := syncs[0].SourceOffset; c < 4*runs; c += 7 {
		got, exact, ok := translateOffset(syncs, c)
		if !ok || got > exactTarget(c) || (exact && got != exactTarget(c)) {
			t.Fatalf("offset %d translated to %d (exact %v, ok %v), exact target %d", c, got, exact, ok, exactTarget(c))
		}
	}
	recent := int64(4*(runs-2) + 2) // inside the last run followed by a sync
	if got, exact, _ := translateOffset(syncs, recent); !exact || got != exactTarget(recent) {
		t.Fatalf("recent offset %d translated to %d (exact %v), want %d exactly", recent, got, exact, exactTarget(recent))
	}
}
