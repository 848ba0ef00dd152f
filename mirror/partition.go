package mirror

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// partitionState is everything the engine counts about one source partition. It lives
// as long as the engine, across assignments, so that counters never go backwards; the
// tracker and claim are set while this process owns the partition.
//
// The hot path touches only atomics (the two histograms included), never a map keyed
// by topic name.
type partitionState struct {
	topic     string
	partition int32

	records  atomic.Int64 // target records acked
	bytes    atomic.Int64 // key + value bytes of acked records
	filtered atomic.Int64 // source records the handler dropped
	skipped  atomic.Int64 // source records skipped under onError: skip
	// fromTarget and overHops count source records dropped by loop prevention
	// (provenance): their provenance named the target, or they had too many hops.
	fromTarget atomic.Int64
	overHops   atomic.Int64
	// committed is the last offset committed (the next to consume): by this process, or
	// as found at assignment; -1 when unknown.
	committed atomic.Int64
	// waiting is 1 while the partition waits for its target topic.
	waiting atomic.Int64
	// resumed counts assignments that started from the target-side progress because
	// the source group had no offset.
	resumed atomic.Int64
	// recreated counts assignments that found the source topic re-created (a new topic
	// ID) and started at its beginning, ignoring the old topic's stored position.
	recreated atomic.Int64
	// probing is set while a caught-up probe of the partition runs (caughtUp), and
	// idleAt is the commit point at which the partition was last seen idle, or -1.
	probing atomic.Bool
	idleAt  atomic.Int64

	// age and latency are the partition's record age and replication latency
	// histograms (metricAge, metricLatency).
	age     *durationHistogram
	latency *durationHistogram

	// syncs is the partition's offset sync state on the ack path (offsetSyncWriter).
	syncs partitionSyncs

	// tracker and claim are those of the current or, once released, the last
	// assignment, so Stats still shows how far it got; assigned tells which.
	mu       sync.Mutex
	tracker  *offsets.Tracker
	claim    sarama.ConsumerGroupClaim
	assigned bool
	// topicID is the source topic's ID the current or last assignment read ("" when
	// unknown); the offset syncs of its acks name it (offsetsync.go).
	topicID string
	// unsent counts the current tracker's records that were never handed to the
	// producer (claimState.unsent): they are never acked and so not in flight.
	unsent int
	// released are trackers of ended assignments that still had records in the
	// producer when their drain ended; the delivery watch keeps watching them until
	// those records are acked.
	released []watchedTracker
}

// watchedTracker is a tracker the delivery watch looks at, with its unsent records.
type watchedTracker struct {
	tracker *offsets.Tracker
	unsent  int
	// topicID is the source topic's ID its assignment read.
	topicID string
}

// inFlight reports whether w has records the producer still owes an ack for.
func (w watchedTracker) inFlight() bool { return w.tracker.InFlight() > w.unsent }

// dropped counts a record that loop prevention dropped.
func (p *partitionState) dropped(why dropReason) {
	if why == dropFromTarget {
		p.fromTarget.Add(1)
	} else {
		p.overHops.Add(1)
	}
}

// attach starts an assignment of the partition: tr tracks claim's records of the source
// topic with ID topicID ("" when unknown).
func (p *partitionState) attach(tr *offsets.Tracker, claim sarama.ConsumerGroupClaim, topicID string) {
	// The claim starts at the group's committed offset; showing it at once gives lag
	// and the commit gauge a value before this process's first commit. It is taken at
	// every assignment, not only the first: a partition that comes back after another
	// member committed further would otherwise show this process's own older commit,
	// and a lag that never ends when nothing new arrives. A partition no group has an
	// offset for starts at initialOffset resolved to an offset in the session's Setup
	// (progressKeeper.startAtInitialOffset), so it has a value from the start too; only
	// a claim that still starts at a sentinel offset leaves the commit unknown until
	// the first one.
	off := claim.InitialOffset()
	if off < 0 {
		off = -1
	}
	p.committed.Store(off)
	p.mu.Lock()
	p.tracker, p.claim, p.assigned, p.unsent, p.topicID = tr, claim, true, 0, topicID
	p.mu.Unlock()
}

// setUnsent records that the current tracker holds n records never sent.
func (p *partitionState) setUnsent(n int) {
	p.mu.Lock()
	p.unsent = n
	p.mu.Unlock()
}

// unwatch takes tr, the tracker of an exactly-once claim, out of the delivery watch
// (delivery.go) if it is still the current one: the claim's session ended, and its
// open transaction commits within the drain limit or is left to the next owner to
// abort, so that nothing is owed for it. Such a tracker holds at most one record in
// flight, the open transaction's ticket.
func (p *partitionState) unwatch(tr *offsets.Tracker) {
	p.mu.Lock()
	if p.tracker == tr {
		p.unsent = 1
	}
	p.mu.Unlock()
}

// highWatermark is the source partition's high watermark as its consumer last saw it,
// or -1.
func (p *partitionState) highWatermark() int64 {
	p.mu.Lock()
	claim, assigned := p.claim, p.assigned
	p.mu.Unlock()
	if claim == nil || !assigned {
		return -1
	}
	return claim.HighWaterMarkOffset()
}

// startOffset is the offset the current assignment started consuming at, or -1 when
// it started at "oldest" or "latest" without a committed offset.
func (p *partitionState) startOffset() int64 {
	p.mu.Lock()
	claim, assigned := p.claim, p.assigned
	p.mu.Unlock()
	if claim == nil || !assigned {
		return -1
	}
	return claim.InitialOffset()
}

// detach ends the assignment. Records still in the producer stay watched.
func (p *partitionState) detach() {
	p.mu.Lock()
	p.assigned = false
	if w := (watchedTracker{p.tracker, p.unsent, p.topicID}); w.tracker != nil && w.inFlight() {
		p.released = append(p.released, w)
	}
	p.mu.Unlock()
}

// topicIDOfLocked returns the source topic ID that tr's assignment read: tr is the
// current or last assignment's tracker, or a released one still in flight (its late
// acks); "" when unknown. p.mu is held.
func (p *partitionState) topicIDOfLocked(tr *offsets.Tracker) string {
	if p.tracker == tr {
		return p.topicID
	}
	for _, w := range p.released {
		if w.tracker == tr {
			return w.topicID
		}
	}
	return ""
}

// watched returns the trackers with records in the producer: the current one while
// assigned and the released ones not done yet (dropping those that are).
func (p *partitionState) watched() []watchedTracker {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = slices.DeleteFunc(p.released, func(w watchedTracker) bool { return !w.inFlight() })
	out := slices.Clone(p.released)
	if w := (watchedTracker{p.tracker, p.unsent, p.topicID}); w.tracker != nil && p.assigned && w.inFlight() {
		out = append(out, w)
	}
	return out
}

// snapshot reads the partition's numbers for Stats and the metrics collector.
func (p *partitionState) snapshot() PartitionStats {
	s := PartitionStats{
		Topic:             p.topic,
		Partition:         p.partition,
		Records:           p.records.Load(),
		Bytes:             p.bytes.Load(),
		Filtered:          p.filtered.Load(),
		Skipped:           p.skipped.Load(),
		Committed:         p.committed.Load(),
		HighWatermark:     -1,
		Consumed:          -1,
		WaitingForTarget:  p.waiting.Load() == 1,
		ResumedFromTarget: p.resumed.Load(),
		Recreated:         p.recreated.Load(),
		LoopFromTarget:    p.fromTarget.Load(),
		LoopOverHops:      p.overHops.Load(),
	}
	p.mu.Lock()
	tr, claim, assigned := p.tracker, p.claim, p.assigned
	p.mu.Unlock()
	s.Assigned = assigned
	if tr != nil {
		if assigned {
			s.InFlight = int64(tr.InFlight())
		}
		if last := tr.LastSeen(); last >= 0 {
			s.Consumed = last + 1
		}
	}
	if claim != nil {
		s.HighWatermark = claim.HighWaterMarkOffset()
		// An assignment that has read nothing yet is positioned where it started.
		if off := claim.InitialOffset(); s.Consumed < 0 && off >= 0 {
			s.Consumed = off
		}
	}
	if s.HighWatermark >= 0 && s.Committed >= 0 {
		s.Lag = max(s.HighWatermark-s.Committed, 0)
	}
	return s
}

// partitionKey identifies a source partition in the registry.
type partitionKey struct {
	topic     string
	partition int32
}

// partitionRegistry holds every partitionState the engine has seen.
type partitionRegistry struct {
	mu    sync.Mutex
	parts map[partitionKey]*partitionState
	m     *metrics
}

func (r *partitionRegistry) get(topic string, partition int32) *partitionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := partitionKey{topic, partition}
	if p, ok := r.parts[k]; ok {
		return p
	}
	p := &partitionState{
		topic:     topic,
		partition: partition,
		age:       newDurationHistogram(r.m.ageBuckets),
		latency:   newDurationHistogram(r.m.latencyBuckets),
	}
	p.committed.Store(-1)
	p.idleAt.Store(-1)
	r.parts[k] = p
	return p
}

// all returns every partition sorted by topic and partition.
func (r *partitionRegistry) all() []*partitionState {
	r.mu.Lock()
	out := make([]*partitionState, 0, len(r.parts))
	for _, p := range r.parts {
		out = append(out, p)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}
