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
// A record larger than what is free waits until enough was given back; a record larger
// than the whole budget waits until nothing is in flight and then passes alone, so no
// record can wait forever. Waiters are woken in no particular order; a partition
// cannot starve for long because every acked record frees its share for whoever asks
// next.
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

	mu sync.Mutex
	// freed is closed, and replaced, when bytes are given back while someone waits.
	freed chan struct{}
}

func newInFlightBudget(limit int64) *inFlightBudget {
	return &inFlightBudget{limit: limit, resume: limit - limit/inFlightResumeShare, freed: make(chan struct{})}
}

// fits reports whether n more bytes fit when used are taken.
func (b *inFlightBudget) fits(used, n int64) bool {
	return used <= 0 || used+n <= b.limit
}

// acquire takes n bytes, waiting while they do not fit. It returns ctx's error when ctx
// ends first and errStopped when stop is closed first; then nothing was taken.
//
// A waiter counts itself in waiters before it looks at used again under the lock; a
// release subtracts from used before it reads waiters. So either the release sees the
// waiter and wakes it, or the waiter sees the released share: no wake-up is lost. A
// waiter wakes once use fell to resume (hysteresis), then takes what fits.
func (b *inFlightBudget) acquire(ctx context.Context, stop <-chan struct{}, n int64) error {
	for {
		if u := b.used.Load(); b.fits(u, n) {
			if !b.used.CompareAndSwap(u, u+n) {
				continue
			}
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return nil
		}
		b.mu.Lock()
		b.waiters.Add(1)
		if b.fits(b.used.Load(), n) {
			b.waiters.Add(-1)
			b.mu.Unlock()
			continue
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
			b.waiters.Add(-1)
		case <-ctx.Done():
			b.waiters.Add(-1)
			return ctx.Err()
		case <-stop:
			b.waiters.Add(-1)
			return errStopped
		}
	}
}

// release gives back n taken by acquire. Waiters are woken once use fell to resume.
func (b *inFlightBudget) release(n int64) {
	if b.used.Add(-n) <= b.resume && b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// usage returns the bytes in use now and the most ever in use.
func (b *inFlightBudget) usage() (used, peak int64) {
	return b.used.Load(), b.peak.Load()
}
