package offsets

import (
	"context"
	"sync"
	"sync/atomic"
)

// Ticket identifies one in-flight record of a Tracker. The engine carries it in the
// producer message's metadata and hands it back to Ack.
type Ticket uint64

// entry is one in-flight source record: its offset and how many of its outputs the
// target has not acknowledged yet.
type entry struct {
	offset  int64
	pending int32
}

// Tracker is the in-flight list of one source partition. It is safe for one goroutine
// that Adds and waits and any number of goroutines that Ack.
type Tracker struct {
	mu sync.Mutex
	// ring holds the entries of tickets head..tail-1 at index ticket&mask. Entries
	// whose records are done stay until every older record is done too.
	ring []entry
	mask uint64
	head uint64
	tail uint64
	// live counts records in the ring that still wait for at least one ack. It is
	// changed under mu but read without it by WaitForRoom's fast path, so that a
	// partition with room costs no lock per record.
	live atomic.Int64
	// lastSeen is the highest offset Added; -1 before the first.
	lastSeen int64

	// waitBelow is the threshold the Add goroutine waits for in WaitBelow, 0 when
	// nobody waits; signal wakes it.
	waitBelow int
	signal    chan struct{}
}

// minRing is the smallest ring; it grows by doubling.
const minRing = 64

// New returns an empty tracker whose ring starts with room for about sizeHint records
// (typically maxInFlightPerPartition), so that steady state never grows it.
func New(sizeHint int) *Tracker {
	n := uint64(minRing)
	for n < uint64(max(sizeHint, 0)) {
		n <<= 1
	}
	return &Tracker{
		ring:     make([]entry, n),
		mask:     n - 1,
		lastSeen: -1,
		signal:   make(chan struct{}, 1),
	}
}

// Add records that the record at offset was read and handed to the target as outputs
// records. outputs 0 means the handler dropped it: it is done at once and the returned
// ticket must not be acked. Offsets must increase from one Add to the next.
func (t *Tracker) Add(offset int64, outputs int) Ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastSeen = offset
	if outputs <= 0 {
		// A done record newer than every in-flight one never is the smallest un-acked
		// offset, so it needs no entry: lastSeen alone moves the commit point past it
		// once the older records are acked.
		return Ticket(t.tail)
	}
	if t.tail-t.head == uint64(len(t.ring)) {
		t.grow()
	}
	tk := t.tail
	t.ring[tk&t.mask] = entry{offset: offset, pending: int32(min(outputs, 1<<30))}
	t.tail++
	t.live.Add(1)
	return Ticket(tk)
}

// grow doubles the ring, keeping every entry at index ticket&mask.
func (t *Tracker) grow() {
	n := uint64(len(t.ring)) * 2
	ring := make([]entry, n)
	for tk := t.head; tk != t.tail; tk++ {
		ring[tk&(n-1)] = t.ring[tk&t.mask]
	}
	t.ring = ring
	t.mask = n - 1
}

// Ack records that the target acknowledged one output of the record behind tk. It
// returns true when that was the record's last output. Acks of unknown or already done
// tickets are ignored and return false, so a duplicate ack cannot move the commit
// point past an un-acked record.
func (t *Tracker) Ack(tk Ticket) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ackLocked(tk) {
		return false
	}
	t.doneLocked(1)
	return true
}

// AckAll is Ack of every ticket in tks, in order, under one lock: the ack reader hands
// over the acks of a produce response a partition at a time, rather than taking the
// lock once per record. It returns how many records were done by them.
func (t *Tracker) AckAll(tks []Ticket) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	done := 0
	for _, tk := range tks {
		if t.ackLocked(tk) {
			done++
		}
	}
	if done > 0 {
		t.doneLocked(done)
	}
	return done
}

// ackLocked counts one acked output of tk's record and reports whether that was its
// last; unknown and already done tickets are ignored. Called under mu.
func (t *Tracker) ackLocked(tk Ticket) bool {
	s := uint64(tk)
	if s < t.head || s >= t.tail {
		return false
	}
	e := &t.ring[s&t.mask]
	if e.pending <= 0 {
		return false
	}
	e.pending--
	return e.pending == 0
}

// doneLocked takes n records that were just done out of the live count, moves the head
// past the done records and wakes a waiter whose bound is now met. Called under mu.
func (t *Tracker) doneLocked(n int) {
	t.live.Add(-int64(n))
	for t.head != t.tail && t.ring[t.head&t.mask].pending == 0 {
		t.head++
	}
	if t.waitBelow > 0 && int(t.live.Load()) < t.waitBelow {
		t.waitBelow = 0
		select {
		case t.signal <- struct{}{}:
		default:
		}
	}
}

// CommitPoint returns the offset to commit: the smallest un-acked offset, or the last
// offset seen + 1 when nothing is in flight. ok is false before the first Add.
func (t *Tracker) CommitPoint() (offset int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.head != t.tail {
		return t.ring[t.head&t.mask].offset, true
	}
	if t.lastSeen < 0 {
		return 0, false
	}
	return t.lastSeen + 1, true
}

// AdvanceIdle moves the commit point from from to to when nothing is in flight and the
// commit point still is from, and reports whether it did. The caller must know that no
// record with an offset in [from, to) will ever be Added (they are transaction markers
// or aborted records the consumer never delivers). Before the first Add, from is the
// offset the partition's consumption started at, which the tracker cannot check.
// Afterwards the tracker behaves as if to-1 was the last offset Added.
func (t *Tracker) AdvanceIdle(from, to int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.head != t.tail || to <= from || (t.lastSeen >= 0 && t.lastSeen+1 != from) {
		return false
	}
	t.lastSeen = to - 1
	return true
}

// InFlight returns how many records wait for at least one ack.
func (t *Tracker) InFlight() int {
	return int(t.live.Load())
}

// LastSeen returns the highest offset Added, or -1.
func (t *Tracker) LastSeen() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSeen
}

// WaitBelow blocks until fewer than n records are in flight or ctx ends. The engine
// uses it with maxInFlightPerPartition for backpressure and with 1 to drain before a
// partition is released. Only one goroutine may wait at a time.
func (t *Tracker) WaitBelow(ctx context.Context, n int) error {
	return t.WaitForRoom(ctx, n, n)
}

// WaitForRoom returns at once when fewer than limit records are in flight; otherwise it
// blocks until fewer than resume (at most limit) are, or ctx ends. A resume below limit
// is hysteresis for backpressure: a reader held at the limit is woken once per
// limit-resume acks rather than once per ack, and then adds that many records in a
// row. Only one goroutine may wait at a time.
func (t *Tracker) WaitForRoom(ctx context.Context, limit, resume int) error {
	if int(t.live.Load()) < limit {
		// Only the waiting goroutine sets waitBelow, and it clears it before it returns.
		return nil
	}
	n := limit
	for {
		t.mu.Lock()
		if int(t.live.Load()) < n {
			t.waitBelow = 0
			t.mu.Unlock()
			return nil
		}
		n = max(min(resume, limit), 1)
		t.waitBelow = n
		t.mu.Unlock()
		select {
		case <-t.signal:
		case <-ctx.Done():
			t.mu.Lock()
			t.waitBelow = 0
			t.mu.Unlock()
			return ctx.Err()
		}
	}
}
