package mirror

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// defaultInFlightBytes is maxInFlightBytes when it is unset and the container has no
// memory limit.
const defaultInFlightBytes = 256 << 20

// inFlightMemoryShare is the part of the container's memory limit that records in
// flight may hold by default: the rest is for the consumer's fetch buffers (outside
// the budget), the producer's encoded requests, the Go runtime and the collector's
// headroom (GOMEMLIMIT is set to 90% of the limit by `run`).
const inFlightMemoryShare = 4

// cgroupMemoryMax is where cgroup v2 exposes the container's memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// inFlightBytesFor returns the byte budget of records in flight: configured when set,
// else a quarter of the container's memory limit (read from memoryMaxFile) when there
// is one, else defaultInFlightBytes.
func inFlightBytesFor(configured int64, memoryMaxFile string) int64 {
	if configured > 0 {
		return configured
	}
	data, err := os.ReadFile(memoryMaxFile)
	if err != nil {
		return defaultInFlightBytes
	}
	limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || limit <= 0 { // "max": no limit
		return defaultInFlightBytes
	}
	return max(limit/inFlightMemoryShare, 1)
}

// inFlightRecordsPerProcess bounds the records in flight in the whole process, all
// partitions together, by default. It is what keeps the producer fed: the idempotent
// producer has one request open per broker and builds the next meanwhile, at most
// max.message.bytes (1 MiB) each, so three brokers are kept busy by about 6 MiB, some
// 25,000 records of 250 bytes. Beyond that a record in flight buys no throughput and
// costs about 1.5 KB of memory (docs/performance.md): with 8 partitions at the
// per-partition default of 10,000 the engine held 80,000 records for the same
// throughput as 32,768 (`go run ./hack/bench --baseline-bin`, docs/performance.md).
const inFlightRecordsPerProcess = 1 << 15

// inFlightRecordsFor returns the bound on records in flight in the process:
// inFlightRecordsPerProcess, or maxInFlightPerPartition when that is larger, so one
// partition can always use its own bound whole.
func inFlightRecordsFor(maxInFlightPerPartition int) int64 {
	return int64(max(inFlightRecordsPerProcess, maxInFlightPerPartition))
}

// InFlightRecordsBound is the most records the engine holds in flight with
// maxInFlightPerPartition and partitions assigned: the per-partition bound times the
// partitions, or the process-wide bound (inFlightRecordsFor) when that is lower.
func InFlightRecordsBound(maxInFlightPerPartition, partitions int) int64 {
	return min(int64(maxInFlightPerPartition)*int64(partitions), inFlightRecordsFor(maxInFlightPerPartition))
}

// inFlightBudget bounds what records in flight in the process hold, in one unit: the
// sender keeps one in bytes (maxInFlightBytes) and one in records (inFlightRecordsFor).
// A record takes its share before it is handed to the producer and gives it back when
// the target acked it (or the send finally failed). Both work with the per-partition
// record limit, not instead of it.
//
// A share that does not fit waits until enough was given back. Waiters are woken once
// use fell to resume (hysteresis), so a share of at most limit-resume always fits when
// it wakes; they are woken in no particular order, and every acked record frees room
// for whoever asks next.
//
// A larger share (over limit-resume, up to larger than the whole budget) could wait
// forever that way: while other partitions keep the budget busy, the room it needs
// never comes free at once (issue 30, item 8). So a large share that does not fit
// takes a turn in a line of large shares, first come first served. The one whose turn
// it is reserves the budget: nobody else takes anything until it has taken its share
// or given up. It is admitted once use fell to limit minus its share, or to 0 when it
// is larger than the whole budget (then it passes alone). The records in flight are
// acked by the producer whatever waits, so that takes about one produce round trip; a
// claim never waits for the budget while holding something only it could give back,
// so the reservation cannot deadlock. A waiter that gives up (its claim ends, the
// engine stops) takes nothing and passes the turn on.
//
// Taking and giving back are atomic operations while nobody waits: the budgets are
// touched twice per record, and a mutex there was one of the engine's per-record
// costs (docs/performance.md). The lock is taken only to wait and to wake waiters.
type inFlightBudget struct {
	limit int64
	// resume is how far use must fall before waiters are woken: hysteresis, as for the
	// per-partition bound (inFlightResumeShare). Without it, while the producer is the
	// bottleneck and the claims wait for room, every ack woke every waiting claim.
	resume int64

	used atomic.Int64
	peak atomic.Int64
	// waiters counts acquires waiting for bytes; release wakes them only when it is
	// not 0.
	waiters atomic.Int64
	// reserved is the large share whose turn it is while it waits for room, else 0:
	// nothing else is taken meanwhile, and a release wakes the waiters only once that
	// share fits (the others could not take anything anyway).
	reserved atomic.Int64

	mu sync.Mutex
	// freed is closed, and replaced, when bytes are given back while someone waits and
	// when a turn ends.
	freed chan struct{}
	// next is the turn the next large share takes, serving the turn being served, left
	// the turns given up before they came.
	next, serving uint64
	left          map[uint64]bool
}

func newInFlightBudget(limit int64) *inFlightBudget {
	return &inFlightBudget{limit: limit, resume: limit - limit/inFlightResumeShare, freed: make(chan struct{}), left: map[uint64]bool{}}
}

// fits reports whether n more bytes fit when used are taken.
func (b *inFlightBudget) fits(used, n int64) bool {
	return used <= 0 || used+n <= b.limit
}

// take takes n when it fits now; false when it does not.
func (b *inFlightBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if !b.fits(u, n) {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// acquire takes n bytes, waiting while they do not fit or the budget is reserved. It
// returns ctx's error when ctx ends first and errStopped when stop is closed first;
// then nothing was taken.
func (b *inFlightBudget) acquire(ctx context.Context, stop <-chan struct{}, n int64) error {
	for {
		if b.reserved.Load() == 0 && b.take(n) {
			return nil
		}
		if n > b.limit-b.resume {
			return b.acquireInTurn(ctx, stop, n)
		}
		if err := b.wait(ctx, stop, func() bool { return b.reserved.Load() == 0 && b.fits(b.used.Load(), n) }); err != nil {
			return err
		}
	}
}

// acquireInTurn is acquire for a large share: it waits for its turn, reserves the
// budget, waits for room and takes n, then passes the turn on.
func (b *inFlightBudget) acquireInTurn(ctx context.Context, stop <-chan struct{}, n int64) error {
	b.mu.Lock()
	turn := b.next
	b.next++
	b.mu.Unlock()
	for {
		if err := b.wait(ctx, stop, func() bool { return b.serving == turn }); err != nil {
			b.leave(turn)
			return err
		}
		b.mu.Lock()
		mine := b.serving == turn
		b.mu.Unlock()
		if mine {
			break
		}
	}
	b.reserved.Store(n)
	defer b.pass()
	for !b.take(n) {
		if err := b.wait(ctx, stop, func() bool { return b.fits(b.used.Load(), n) }); err != nil {
			return err
		}
	}
	return nil
}

// wait returns nil once ready might hold: at once when it holds now, else after bytes
// were given back or a turn ended. ready is called under the lock.
//
// A waiter counts itself in waiters before it looks at the budget under the lock; a
// release subtracts from used before it reads waiters, and a turn ends (pass) before
// it takes the lock to wake. So either the waiter sees the change or it is woken: no
// wake-up is lost.
func (b *inFlightBudget) wait(ctx context.Context, stop <-chan struct{}, ready func() bool) error {
	b.mu.Lock()
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	if ready() {
		b.mu.Unlock()
		return nil
	}
	freed := b.freed
	b.mu.Unlock()
	select {
	case <-freed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	}
}

// pass ends the turn being served: the reservation is lifted, the next turn not given
// up comes, and every waiter looks again.
func (b *inFlightBudget) pass() {
	b.reserved.Store(0)
	b.mu.Lock()
	b.advance()
	b.mu.Unlock()
}

// leave gives up turn before it was served (or as it came).
func (b *inFlightBudget) leave(turn uint64) {
	b.mu.Lock()
	if b.serving == turn {
		b.advance()
	} else {
		b.left[turn] = true
	}
	b.mu.Unlock()
}

// advance moves to the next turn not given up and wakes the waiters. Called under the lock.
func (b *inFlightBudget) advance() {
	b.serving++
	for b.left[b.serving] {
		delete(b.left, b.serving)
		b.serving++
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// inLine returns how many large shares hold a turn: the one served and those waiting.
func (b *inFlightBudget) inLine() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.next-b.serving) - len(b.left)
}

// release gives back n taken by acquire. Waiters are woken once use fell to resume,
// and, while a large share has reserved the budget, once that share fits.
func (b *inFlightBudget) release(n int64) {
	if u := b.used.Add(-n); u <= b.resume && b.waiters.Load() > 0 && b.reservedFits(u) {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// reservedFits reports whether the reserved share, if any, fits when used are taken.
func (b *inFlightBudget) reservedFits(used int64) bool {
	r := b.reserved.Load()
	return r == 0 || b.fits(used, r)
}

// usage returns the bytes in use now and the most ever in use.
func (b *inFlightBudget) usage() (used, peak int64) {
	return b.used.Load(), b.peak.Load()
}
