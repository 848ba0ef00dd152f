package mirror

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
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

// byteBudget bounds the bytes of records in flight in the process: a record takes its
// bytes before it is handed to the producer and gives them back when the target acked
// it (or the send finally failed). It works with the per-partition record limit, not
// instead of it.
//
// A record larger than what is free waits until enough was given back; a record larger
// than the whole budget waits until nothing is in flight and then passes alone, so no
// record can wait forever. Waiters are woken in no particular order; a partition
// cannot starve for long because every acked record frees its bytes for whoever asks
// next.
type byteBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
	peak int64
	// freed is closed, and replaced, when bytes are given back while someone waits.
	freed   chan struct{}
	waiters int
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting while they do not fit. It returns ctx's error when ctx
// ends first and errStopped when stop is closed first; then nothing was taken.
func (b *byteBudget) acquire(ctx context.Context, stop <-chan struct{}, n int64) error {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.limit {
		b.waiters++
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			b.stopWaiting()
			return ctx.Err()
		case <-stop:
			b.stopWaiting()
			return errStopped
		}
		b.mu.Lock()
		b.waiters--
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
	return nil
}

func (b *byteBudget) stopWaiting() {
	b.mu.Lock()
	b.waiters--
	b.mu.Unlock()
}

// release gives back n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// usage returns the bytes in use now and the most ever in use.
func (b *byteBudget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
