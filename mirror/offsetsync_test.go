package mirror

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// syncsFor plays a partition's acks (source offset -> target offset, in order) through
// the writer's rules and returns the syncs it writes, with a final position flush.
func syncsFor(acks [][2]int64) []OffsetSync {
	w := &offsetSyncWriter{queue: make(chan queuedSync, len(acks)+1)}
	p := &partitionState{topic: "t", partition: 0}
	for _, a := range acks {
		w.observe(p, nil, a[0], a[1])
	}
	w.parts = &partitionRegistry{parts: map[partitionKey]*partitionState{{"t", 0}: p}}
	w.flushPositions()
	close(w.queue)
	var out []OffsetSync
	for q := range w.queue {
		out = append(out, q.sync)
	}
	return out
}

// storeOf returns a store that read syncs, in order, for partition t/0.
func storeOf(syncs ...OffsetSync) *offsetSyncStore {
	st := newOffsetSyncStore("x")
	for _, s := range syncs {
		st.add(partitionKey{"t", 0}, "", s)
	}
	return st
}

// translateSyncs translates committed through a store that read syncs, in order.
func translateSyncs(syncs []OffsetSync, committed int64) (int64, bool, bool) {
	return storeOf(syncs...).translate(partitionKey{"t", 0}, "", committed)
}

// chain returns syncs, given as {source, target, previous}, as one chain starting at
// the first.
func chain(syncs ...[3]int64) []OffsetSync {
	out := make([]OffsetSync, len(syncs))
	for i, s := range syncs {
		out[i] = OffsetSync{SourceOffset: s[0], TargetOffset: s[1], Previous: s[2], ChainSource: syncs[0][0], ChainTarget: syncs[0][1]}
	}
	return out
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
	if len(syncs) != 3 || syncs[0].SourceOffset != 0 || syncs[1].SourceOffset != 20 || syncs[2].SourceOffset != 32 {
		t.Fatalf("syncs %+v: want one per delta change and none more (0, 20, 32)", syncs)
	}
	for _, s := range syncs {
		if s.ChainSource != 0 || s.ChainTarget != 0 || s.End {
			t.Fatalf("sync %+v: want chain 0/0 (the first acked record) and no end", s)
		}
	}
	broken := chain([3]int64{0, 0, -1}, [3]int64{20, 10, -1})
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
		"right after the last sync":   {syncs, 33, 21, true, true},
		"past the last sync":          {syncs, 34, 21, false, true},
		"chain broken: safe side":     {broken, 7, 1, false, true},
		"chain broken, on the second": {broken, 20, 10, true, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, exact, ok := translateSyncs(tc.syncs, tc.committed)
			if got != tc.want || exact != tc.exact || ok != tc.ok {
				t.Fatalf("translateOffset(%d) = %d exact %v ok %v, want %d exact %v ok %v", tc.committed, got, exact, ok, tc.want, tc.exact, tc.ok)
			}
		})
	}
}

// TestTranslationAfterARestart: the first owner mirrored 0..200 to 0..200 and was
// killed; the restarted mirror copies from 150 again, to 260 on. While its syncs have
// not passed 200, a group at 180 resumes at the first owner's copy of 180 (the second
// copy may not be there yet); once they have, after the second copy, exactly.
func TestTranslationAfterARestart(t *testing.T) {
	first := chain([3]int64{0, 0, -1}, [3]int64{100, 100, 0}, [3]int64{200, 200, 100})
	second := chain([3]int64{150, 260, -1})
	if to, exact, _ := translateSyncs(append(first, second...), 180); to != 180 || exact {
		t.Fatalf("before the second copy of 180 is known: translated to %d (exact %v), want 180, not exact", to, exact)
	}
	second = chain([3]int64{150, 260, -1}, [3]int64{250, 360, 150})
	if to, exact, _ := translateSyncs(append(first, second...), 180); to != 290 || !exact {
		t.Fatalf("after the second copy: translated to %d (exact %v), want 290, exact", to, exact)
	}
	// Past both: the restarted owner's copies only.
	if to, exact, _ := translateSyncs(append(first, second...), 250); to != 360 || !exact {
		t.Fatalf("translated 250 to %d (exact %v), want 360, exact", to, exact)
	}
}

func TestOffsetSyncEncoding(t *testing.T) {
	for _, s := range []OffsetSync{
		{SourceOffset: 1 << 40, TargetOffset: 7, Previous: -1, ChainSource: 1 << 39, ChainTarget: 3},
		{SourceOffset: 5, TargetOffset: 7, Previous: 2, ChainSource: 1, ChainTarget: 3, End: true},
	} {
		for _, id := range []string{"", "fAYMzLVdQ5Si8bcxp0Y3Nw"} {
			got, gotID, err := decodeOffsetSync(s.encode(id))
			if err != nil || got != s || gotID != id {
				t.Fatalf("decode(encode(%+v, %q)) = %+v, %q, %v", s, id, got, gotID, err)
			}
		}
		// The topic ID follows the fixed part, which an engine of the previous release
		// reads alone: it reads the same sync, naming no ID.
		if withID := s.encode("fAYMzLVdQ5Si8bcxp0Y3Nw"); !bytes.Equal(withID[:offsetSyncValueBytes], s.encode("")) {
			t.Fatalf("the fixed part of a sync naming a topic ID differs from the sync without: %x", withID)
		}
	}
	// A version 1 value (no chain) still reads, as the chain of unknown start.
	v1 := []byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if got, id, err := decodeOffsetSync(v1); err != nil || id != "" || got != (OffsetSync{SourceOffset: 9, TargetOffset: 8, Previous: -1, ChainSource: -1, ChainTarget: -1}) {
		t.Fatalf("decode(version 1) = %+v, %q, %v", got, id, err)
	}
	if _, _, err := decodeOffsetSync([]byte{3, 1, 2}); err == nil {
		t.Fatal("decoded a value of an unknown version")
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
		s := OffsetSync{SourceOffset: 4*r + 1, TargetOffset: 3 * r, Previous: prev, ChainSource: 1, ChainTarget: 0}
		st.add(tp, "", s)
		prev = s.SourceOffset
	}
	sp := st.partition(tp, "")
	if len(sp.chains) != 1 || sp.total != len(sp.chains[0].points) || sp.total > maxOffsetSyncsPerPartition {
		t.Fatalf("store holds %d chains, %d syncs (counted %d), bound %d", len(sp.chains), len(sp.chains[0].points), sp.total, maxOffsetSyncsPerPartition)
	}
	syncs := sp.chains[0].points
	exactTarget := func(c int64) int64 { // first mirrored record at or after c
		r := c / 4
		if c%4 == 0 {
			return 3 * r // c filtered: the run starting at c+1
		}
		return 3*r + c%4 - 1
	}
	for c := syncs[0].SourceOffset; c < 4*runs; c += 7 {
		got, exact, ok := st.translate(tp, "", c)
		if !ok || got > exactTarget(c) || (exact && got != exactTarget(c)) {
			t.Fatalf("offset %d translated to %d (exact %v, ok %v), exact target %d", c, got, exact, ok, exactTarget(c))
		}
	}
	recent := int64(4*(runs-2) + 2) // inside the last run followed by a sync
	if got, exact, _ := st.translate(tp, "", recent); !exact || got != exactTarget(recent) {
		t.Fatalf("recent offset %d translated to %d (exact %v), want %d exactly", recent, got, exact, exactTarget(recent))
	}

	// The same syncs with groups pinned at old offsets: within the same bound, the
	// pinned offsets still translate exactly (a filtered one, a run's first and a
	// run's middle record), and a group that moved on unpins its old offset.
	pinned := newOffsetSyncStore("x")
	pins := map[string]int64{"a": 6, "b": 4*100 + 1, "c": 4*5000 + 3}
	for g, o := range pins {
		pinned.pinGroup(g, map[partitionKey]int64{tp: o})
	}
	prev = -1
	for r := int64(0); r < runs; r++ {
		if r == runs/2 {
			pinned.pinGroup("b", map[partitionKey]int64{tp: 4*(runs/2) - 2})
			pins["b"] = 4*(runs/2) - 2
		}
		s := OffsetSync{SourceOffset: 4*r + 1, TargetOffset: 3 * r, Previous: prev, ChainSource: 1, ChainTarget: 0}
		pinned.add(tp, "", s)
		prev = s.SourceOffset
	}
	if sp := pinned.partition(tp, ""); sp.total > maxOffsetSyncsPerPartition {
		t.Fatalf("store with pins holds %d syncs, bound %d", sp.total, maxOffsetSyncsPerPartition)
	}
	for g, c := range pins {
		if got, exact, ok := pinned.translate(tp, "", c); !ok || !exact || got != exactTarget(c) {
			t.Errorf("group %s's offset %d translated to %d (exact %v, ok %v), want %d exactly", g, c, got, exact, ok, exactTarget(c))
		}
	}
	if _, exact, _ := pinned.translate(tp, "", 4*100+1); exact {
		t.Errorf("offset %d, unpinned when its group moved on, still translates exactly: its syncs were kept", 4*100+1)
	}
}

// TestOffsetSyncChainsOfOnePartition follows one partition's writer through two
// assignments in one process: the first ends with records in flight (its drain gave
// up), the partition comes back with a new tracker, and the first assignment's records
// are acked after the second's first ones. Each assignment's syncs name its own chain
// (its first acked record), link only to its own syncs, and each chain's last sync says
// End once its assignment ended and nothing of it is in flight.
func TestOffsetSyncChainsOfOnePartition(t *testing.T) {
	p := &partitionState{topic: "t", partition: 0}
	w := &offsetSyncWriter{queue: make(chan queuedSync, 64), parts: &partitionRegistry{parts: map[partitionKey]*partitionState{{"t", 0}: p}}}
	drain := func() []OffsetSync {
		var out []OffsetSync
		for {
			select {
			case q := <-w.queue:
				out = append(out, q.sync)
			default:
				return out
			}
		}
	}
	first := offsets.New(16)
	assign := func(tr *offsets.Tracker) {
		p.mu.Lock()
		p.tracker, p.assigned = tr, true
		p.mu.Unlock()
	}
	assign(first)
	tickets := map[int64]offsets.Ticket{}
	for s := int64(0); s < 6; s++ {
		tickets[s] = first.Add(s, 1)
	}
	for s := int64(0); s < 3; s++ {
		w.observe(p, first, s, s)
		first.Ack(tickets[s])
	}
	p.detach()
	w.assignmentEnded(p, first, 0)
	w.flushPositions()
	if got := drain(); len(got) != 2 || got[1] != (OffsetSync{SourceOffset: 2, TargetOffset: 2, Previous: 0, ChainSource: 0, ChainTarget: 0}) {
		t.Fatalf("first assignment, 3 of 6 records in flight acked: syncs %+v, want its start and its last position, no end", got)
	}

	second := offsets.New(16)
	assign(second)
	for s := int64(3); s < 5; s++ {
		w.observe(p, second, s, 7+s) // the new owner's copies of 3, 4 at 10, 11
		second.Ack(second.Add(s, 1))
	}
	for s := int64(3); s < 6; s++ {
		w.observe(p, first, s, 9+s) // the first assignment's late copies at 12..14
		first.Ack(tickets[s])
	}
	w.flushPositions()
	got := drain()
	want := []OffsetSync{
		{SourceOffset: 3, TargetOffset: 10, Previous: -1, ChainSource: 3, ChainTarget: 10},
		{SourceOffset: 3, TargetOffset: 12, Previous: 2, ChainSource: 0, ChainTarget: 0},
		{SourceOffset: 4, TargetOffset: 11, Previous: 3, ChainSource: 3, ChainTarget: 10},
		{SourceOffset: 5, TargetOffset: 14, Previous: 3, ChainSource: 0, ChainTarget: 0, End: true},
	}
	if len(got) != len(want) {
		t.Fatalf("syncs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sync %d is %+v, want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
	w.flushPositions()
	if got := drain(); len(got) != 0 {
		t.Fatalf("a flush without news wrote %+v", got)
	}
	// The second assignment ends with nothing in flight: its last position again, with End.
	p.detach()
	w.assignmentEnded(p, second, 0)
	w.flushPositions()
	if got := drain(); len(got) != 1 || got[0] != (OffsetSync{SourceOffset: 4, TargetOffset: 11, Previous: 3, ChainSource: 3, ChainTarget: 10, End: true}) {
		t.Fatalf("second assignment ended: syncs %+v, want its last position with End, linked as before", got)
	}
}

// TestOffsetSyncChainEndsWhenAcksComeAfterTheEnd: an assignment ends before any of its
// records was acked (its drain gave up on all of them); they are acked later. Its chain
// starts at the first of them and its last sync says End once none is in flight.
func TestOffsetSyncChainEndsWhenAcksComeAfterTheEnd(t *testing.T) {
	p := &partitionState{topic: "t", partition: 0}
	w := &offsetSyncWriter{queue: make(chan queuedSync, 64), parts: &partitionRegistry{parts: map[partitionKey]*partitionState{{"t", 0}: p}}}
	tr := offsets.New(16)
	p.mu.Lock()
	p.tracker, p.assigned = tr, true
	p.mu.Unlock()
	tickets := []offsets.Ticket{tr.Add(10, 1), tr.Add(11, 1)}
	p.detach()
	w.assignmentEnded(p, tr, 0)
	w.flushPositions()
	if len(w.queue) != 0 {
		t.Fatalf("%d syncs written before any ack", len(w.queue))
	}
	for i, s := range []int64{10, 11} {
		w.observe(p, tr, s, 40+s)
		tr.Ack(tickets[i])
	}
	w.flushPositions()
	close(w.queue)
	var got []OffsetSync
	for q := range w.queue {
		got = append(got, q.sync)
	}
	want := []OffsetSync{
		{SourceOffset: 10, TargetOffset: 50, Previous: -1, ChainSource: 10, ChainTarget: 50},
		{SourceOffset: 11, TargetOffset: 51, Previous: 10, ChainSource: 10, ChainTarget: 50, End: true},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("syncs %+v, want %+v", got, want)
	}
}
