package mirror

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// TestTranslationOfTwoWritersAfterASlowDrain is issue 30 item 2 at the store: owner a
// mirrored 0..99 to 0..99 and its drain gave up with 100..149 in flight; owner b
// copied 100..199 to 100..199; a's 100..149 then landed at 200..249; b copied 200..249
// to 250..299. The syncs arrive in the order they were written. Before chains, a's late
// syncs replaced b's (the later copies) and 120 translated to 220, exactly, skipping
// 150..199, whose only copies are b's.
func TestTranslationOfTwoWritersAfterASlowDrain(t *testing.T) {
	a := func(s, t, prev int64) OffsetSync {
		return OffsetSync{SourceOffset: s, TargetOffset: t, Previous: prev, ChainSource: 0, ChainTarget: 0}
	}
	b := func(s, t, prev int64) OffsetSync {
		return OffsetSync{SourceOffset: s, TargetOffset: t, Previous: prev, ChainSource: 100, ChainTarget: 100}
	}
	aLate := []OffsetSync{a(100, 200, 99), a(149, 249, 100)}
	aLate[1].End = true
	written := []OffsetSync{a(0, 0, -1), a(99, 99, 0), b(100, 100, -1), b(199, 199, 100), aLate[0], aLate[1], b(200, 250, 199), b(249, 299, 200)}
	tests := map[string]struct {
		committed, want int64
		exact           bool
	}{
		// 120..149: a's late copies are the later ones; 150..199: only b's copies.
		"inside both copies":   {120, 150, false},
		"where a's copies end": {150, 150, false},
		"inside b's only":      {180, 180, false},
		"after both":           {220, 270, true},
		"before the overlap":   {50, 50, true},
		"at b's start":         {100, 150, true},
		"past every sync":      {250, 300, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, exact, ok := translateSyncs(written, tc.committed)
			if !ok || got != tc.want || exact != tc.exact {
				t.Fatalf("translated %d to %d (exact %v, ok %v), want %d (exact %v)", tc.committed, got, exact, ok, tc.want, tc.exact)
			}
		})
	}
}

// simWriter is one owner of the simulated partition: a process with its own offset
// sync writer, tracker and queue.
type simWriter struct {
	id      int
	w       *offsetSyncWriter
	p       *partitionState
	tr      *offsets.Tracker
	tickets map[int64]offsets.Ticket
	next    int64   // the next source offset to read
	flight  []int64 // source offsets sent and not landed, in order
	late    bool    // its assignment ended; its records in flight still land
	crashed bool
}

// simCopy is one record on the simulated target.
type simCopy struct {
	source int64
	writer int
	acked  bool // false: the writer crashed before it saw the ack
}

// simulation plays owners of one source partition taking turns, with drains that give
// up (records of the old owner landing among the new owner's), crashes (records acked
// but never synced, in-flight records lost), filtered records, a small sync queue that
// overflows, and syncs written in whatever order the writers flush their queues. The
// writers are the engine's own (offsetSyncWriter with real trackers).
type simulation struct {
	rng      *rand.Rand
	filtered func(int64) bool
	records  int64
	writers  []*simWriter
	log      []simCopy    // the target partition
	topic    []OffsetSync // the sync topic, in the order written
	topicIDs []string     // the topic ID each sync of topic names
	group    int64        // the mirror's committed offset
	// upgrade, when set, plays a rolling upgrade: each owner is a process of the
	// release that names the topic ID (simTopicID) or, at random, of the earlier one
	// that names none; translations are of the topic with that ID.
	upgrade bool
}

// simTopicID is the simulated source topic's ID in a rolling upgrade.
const simTopicID = "topic-id"

// translationID is the current topic ID the simulation's translations use.
func (sim *simulation) translationID() string {
	if sim.upgrade {
		return simTopicID
	}
	return ""
}

func newSimulation(seed uint64, records int64) *simulation {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	share := rng.Float64() * 0.4
	drop := map[int64]bool{}
	for s := range records {
		drop[s] = rng.Float64() < share
	}
	return &simulation{rng: rng, records: records, filtered: func(s int64) bool { return drop[s] }}
}

func (sim *simulation) active() *simWriter {
	if n := len(sim.writers); n > 0 {
		if w := sim.writers[n-1]; !w.late && !w.crashed {
			return w
		}
	}
	return nil
}

// startOwner starts the next owner at the group's committed offset.
func (sim *simulation) startOwner() {
	p := &partitionState{topic: "t", partition: 0}
	tr := offsets.New(64)
	p.tracker, p.assigned = tr, true
	if sim.upgrade && sim.rng.IntN(2) == 0 {
		p.topicID = simTopicID
	}
	w := &offsetSyncWriter{queue: make(chan queuedSync, 1+sim.rng.IntN(4)),
		parts: &partitionRegistry{parts: map[partitionKey]*partitionState{{"t", 0}: p}}}
	sim.writers = append(sim.writers, &simWriter{id: len(sim.writers), w: w, p: p, tr: tr, tickets: map[int64]offsets.Ticket{}, next: sim.group})
}

// land writes w's oldest record in flight to the target; the writer sees the ack
// unless it crashed.
func (sim *simulation) land(w *simWriter, acked bool) {
	s := w.flight[0]
	w.flight = w.flight[1:]
	pos := int64(len(sim.log))
	sim.log = append(sim.log, simCopy{source: s, writer: w.id, acked: acked})
	if acked {
		w.w.observe(w.p, w.tr, s, pos)
		w.tr.Ack(w.tickets[s])
	}
}

// drain moves up to n queued syncs of w to the sync topic.
func (sim *simulation) drain(w *simWriter, n int) {
	for ; n > 0; n-- {
		select {
		case q := <-w.w.queue:
			sim.topic = append(sim.topic, q.sync)
			sim.topicIDs = append(sim.topicIDs, q.topicID)
		default:
			return
		}
	}
}

// flushAll makes every live writer write its last position (and End when due): what a
// second of the writers' ticks does.
func (sim *simulation) flushAll() {
	for _, w := range sim.writers {
		if !w.crashed {
			sim.drain(w, cap(w.w.queue))
			w.w.flushPositions()
			sim.drain(w, cap(w.w.queue))
		}
	}
}

// step does one random thing.
func (sim *simulation) step() {
	a := sim.active()
	switch r := sim.rng.IntN(100); {
	case r < 35 && a != nil && a.next < sim.records:
		s := a.next
		a.next++
		if sim.filtered(s) {
			a.tr.Add(s, 0)
			return
		}
		a.tickets[s] = a.tr.Add(s, 1)
		a.flight = append(a.flight, s)
	case r < 65:
		var ready []*simWriter
		for _, w := range sim.writers {
			if !w.crashed && len(w.flight) > 0 {
				ready = append(ready, w)
			}
		}
		if len(ready) > 0 {
			sim.land(ready[sim.rng.IntN(len(ready))], true)
		}
	case r < 72 && a != nil:
		if cp, ok := a.tr.CommitPoint(); ok {
			sim.group = cp
		}
	case r < 80:
		if w := sim.writers[sim.rng.IntN(len(sim.writers))]; !w.crashed {
			w.w.flushPositions()
		}
	case r < 92:
		if w := sim.writers[sim.rng.IntN(len(sim.writers))]; !w.crashed {
			sim.drain(w, 1+sim.rng.IntN(3))
		}
	case r < 97 && a != nil:
		sim.handOver(a)
	}
}

// handOver ends a's assignment: a clean drain, a drain that gives up, or a crash.
func (sim *simulation) handOver(a *simWriter) {
	switch sim.rng.IntN(3) {
	case 0: // the drain completes, the commit covers everything acked
		for len(a.flight) > 0 {
			sim.land(a, true)
		}
		if cp, ok := a.tr.CommitPoint(); ok {
			sim.group = cp
		}
		a.w.assignmentEnded(a.p, a.tr, 0)
		a.late = true
	case 1: // the drain gives up: the rest lands later, among the next owner's records
		if cp, ok := a.tr.CommitPoint(); ok {
			sim.group = cp
		}
		a.w.assignmentEnded(a.p, a.tr, 0)
		a.late = true
	default: // killed: what was sent may land unseen, the rest is lost, queued syncs too
		for n := sim.rng.IntN(len(a.flight) + 1); n > 0; n-- {
			sim.land(a, false)
		}
		a.flight, a.crashed = nil, true
	}
	a.p.detach()
	sim.startOwner()
}

// storeFrom is what a reader of sim's sync topic holds after compaction cleaned the
// first cut records: of those, only the last one (all syncs of a partition share a key).
func (sim *simulation) storeFrom(cut int) *offsetSyncStore {
	st := newOffsetSyncStore("x")
	if cut > 0 {
		st.add(partitionKey{"t", 0}, sim.topicIDs[cut-1], sim.topic[cut-1])
	}
	for i, s := range sim.topic[cut:] {
		st.add(partitionKey{"t", 0}, sim.topicIDs[cut+i], s)
	}
	return st
}

// check translates every source offset through st and fails when a consumer starting
// at the translation skips a record with a copy that the syncs st read describe (a
// copy at or before its writer's last sync there, or of a writer whose chain ended), or
// when a translation said exact and a copy of an earlier record is at or after it
// (checked without compaction, and for the copies st knows of or that a writer still
// running made: what a killed writer copied after its last sync is not known).
func (sim *simulation) check(t *testing.T, st *offsetSyncStore, what string, checkExact bool) {
	t.Helper()
	// lastSynced[w] is the target offset of w's last sync that st read, whatever topic
	// ID it named (the simulated topic is never re-created: every described copy must
	// be read); ended[w] when it had End. used[w] when the translation uses w's chain.
	lastSynced, ended, used := map[int64]int64{}, map[int64]bool{}, map[int64]bool{}
	for _, sp := range st.parts[partitionKey{"t", 0}] {
		for _, ch := range sp.chains {
			lastSynced[ch.target], ended[ch.target] = ch.last().TargetOffset, ch.ended
		}
	}
	if sp := st.translatable(partitionKey{"t", 0}, sim.translationID()); sp != nil {
		for _, ch := range sp.chains {
			used[ch.target] = true
		}
	}
	chainOf := map[int]int64{} // writer -> the target offset of its first acked copy
	for pos, cp := range sim.log {
		if _, ok := chainOf[cp.writer]; !ok && cp.acked {
			chainOf[cp.writer] = int64(pos)
		}
	}
	described := func(pos int64, cp simCopy) bool {
		c, ok := chainOf[cp.writer]
		if !ok || !cp.acked {
			return false
		}
		last, known := lastSynced[c]
		return known && (pos <= last || ended[c])
	}
	// Per source offset: the last copy of any writer, whether one copy is described,
	// and the last copy of a writer st knows of.
	n := sim.records
	lastCopy, lastKnown := make([]int64, n), make([]int64, n)
	mustRead := make([]bool, n)
	for i := range n {
		lastCopy[i], lastKnown[i] = -1, -1
	}
	for pos, cp := range sim.log {
		p := int64(pos)
		lastCopy[cp.source] = max(lastCopy[cp.source], p)
		mustRead[cp.source] = mustRead[cp.source] || described(p, cp)
		// What a killed writer copied after its last sync is not known (it is copied
		// again by a later owner): it may be read again. So may the copies of a chain
		// the translation does not use (a chain of no topic ID before the first chain
		// with one: it may be another incarnation's).
		c, started := chainOf[cp.writer]
		if started && used[c] && (described(p, cp) || !sim.writers[cp.writer].crashed) {
			lastKnown[cp.source] = max(lastKnown[cp.source], p)
		}
	}
	before := int64(-1) // the last known copy of a record before c
	for c := int64(0); c <= n; c++ {
		if c > 0 {
			before = max(before, lastKnown[c-1])
		}
		target, exact, ok := st.translate(partitionKey{"t", 0}, sim.translationID(), c)
		if !ok {
			continue
		}
		if exact && checkExact && before >= target {
			t.Fatalf("%s: source offset %d translated to %d, exact, but target offset %d holds a copy of an earlier record\n%s",
				what, c, target, before, sim)
		}
		for s := c; s < n; s++ {
			if mustRead[s] && lastCopy[s] < target {
				t.Fatalf("%s: source offset %d translated to %d (exact %v) skips record %d, whose copies are at %v\n%s",
					what, c, target, exact, s, sim.copiesOf(s), sim)
			}
		}
	}
}

func (sim *simulation) copiesOf(s int64) []string {
	var out []string
	for pos, cp := range sim.log {
		if cp.source == s {
			out = append(out, fmt.Sprintf("%d (writer %d, acked %v)", pos, cp.writer, cp.acked))
		}
	}
	return out
}

func (sim *simulation) String() string {
	out := "target:"
	for pos, cp := range sim.log {
		out += fmt.Sprintf(" %d:%d/w%d", pos, cp.source, cp.writer)
		if !cp.acked {
			out += "?"
		}
	}
	out += "\nsyncs:"
	for i, s := range sim.topic {
		out += fmt.Sprintf(" [%d->%d prev %d chain %d/%d end %v", s.SourceOffset, s.TargetOffset, s.Previous, s.ChainSource, s.ChainTarget, s.End)
		if id := sim.topicIDs[i]; id != "" {
			out += " id " + id
		}
		out += "]"
	}
	return out
}

// TestTranslationNeverSkipsUnderRandomInterleavings runs many random histories of
// owners taking turns (issue 30 item 2, randomised): at random moments, and at the end
// once every writer flushed, every source offset translates without skipping a record
// the syncs read describe, also after compaction, and a translation said to be exact
// reads no earlier record again.
func TestTranslationNeverSkipsUnderRandomInterleavings(t *testing.T) {
	testTranslationUnderRandomInterleavings(t, false)
}

// TestTranslationNeverSkipsDuringARollingUpgrade runs the same histories with each
// owner a process of either release: one that names the topic ID in its syncs, or an
// earlier one that names none. Translations of the topic with that ID skip no record
// that any sync describes.
func TestTranslationNeverSkipsDuringARollingUpgrade(t *testing.T) {
	testTranslationUnderRandomInterleavings(t, true)
}

func testTranslationUnderRandomInterleavings(t *testing.T, upgrade bool) {
	const histories = 400
	for seed := uint64(1); seed <= histories; seed++ {
		sim := newSimulation(seed, 60+int64(seed%5)*30)
		sim.upgrade = upgrade
		sim.startOwner()
		for step := 0; step < 4000; step++ {
			sim.step()
			if step%500 == 499 {
				sim.check(t, sim.storeFrom(0), fmt.Sprintf("seed %d, step %d", seed, step), false)
			}
		}
		// The last owner mirrors everything and every live writer flushes.
		for a := sim.active(); a != nil && a.next < sim.records; a = sim.active() {
			sim.step()
		}
		for _, w := range sim.writers {
			for !w.crashed && len(w.flight) > 0 {
				sim.land(w, true)
			}
		}
		sim.flushAll()
		sim.flushAll()
		sim.check(t, sim.storeFrom(0), fmt.Sprintf("seed %d, all flushed", seed), true)
		if len(sim.topic) > 1 {
			cut := 1 + sim.rng.IntN(len(sim.topic)-1)
			sim.check(t, sim.storeFrom(cut), fmt.Sprintf("seed %d, compacted up to sync %d", seed, cut), false)
		}
	}
}

// TestTranslationWithManyChains fills a partition's store with more chains than its
// bound holds (every owner a short one, some ending cleanly, some killed): the store
// stays bounded, and every offset it still translates skips nothing.
func TestTranslationWithManyChains(t *testing.T) {
	sim := newSimulation(7, 3000)
	sim.startOwner()
	for a := sim.active(); a != nil && a.next < sim.records; a = sim.active() {
		for range 3 {
			sim.step()
		}
		if sim.rng.IntN(4) == 0 {
			sim.handOver(a)
		}
	}
	for _, w := range sim.writers {
		for !w.crashed && len(w.flight) > 0 {
			sim.land(w, true)
		}
	}
	sim.flushAll()
	sim.flushAll()
	st := sim.storeFrom(0)
	sp := st.partition(partitionKey{"t", 0}, "")
	if sp.total > maxOffsetSyncsPerPartition || len(sim.writers) < 2*maxOffsetSyncsPerPartition/4 {
		t.Fatalf("%d owners, store holds %d syncs in %d chains: want many more owners than the bound (%d) holds, and the bound kept",
			len(sim.writers), sp.total, len(sp.chains), maxOffsetSyncsPerPartition)
	}
	t.Logf("%d owners, %d syncs; the store keeps %d syncs in %d chains, translating from source offset %d", len(sim.writers), len(sim.topic), sp.total, len(sp.chains), sp.floor)
	sim.check(t, st, "many chains", true)
}

// BenchmarkOffsetSyncTranslate is one checkpoint's translation of one partition: a
// group near the end of a chain of 1000 syncs, alone or after 200 earlier owners.
func BenchmarkOffsetSyncTranslate(b *testing.B) {
	for _, owners := range []int{1, 200} {
		b.Run(fmt.Sprintf("owners=%d", owners), func(b *testing.B) {
			st := newOffsetSyncStore("x")
			tp := partitionKey{"t", 0}
			var source, target int64
			for o := 0; o < owners-1; o++ {
				st.add(tp, "", OffsetSync{SourceOffset: source, TargetOffset: target, Previous: -1, ChainSource: source, ChainTarget: target})
				st.add(tp, "", OffsetSync{SourceOffset: source + 9, TargetOffset: target + 9, Previous: source, ChainSource: source, ChainTarget: target, End: true})
				source, target = source+10, target+10
			}
			start := OffsetSync{SourceOffset: source, TargetOffset: target, Previous: -1, ChainSource: source, ChainTarget: target}
			st.add(tp, "", start)
			prev := source
			for i := int64(1); i <= 800; i++ {
				s := OffsetSync{SourceOffset: source + 1000*i, TargetOffset: target + 999*i, Previous: prev, ChainSource: start.SourceOffset, ChainTarget: start.TargetOffset}
				st.add(tp, "", s)
				prev = s.SourceOffset
			}
			committed := prev - 500
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, _, ok := st.translate(tp, "", committed); !ok {
					b.Fatal("not translated")
				}
			}
		})
	}
}
