package mirror

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// durationHistogram is one partition's histogram of durations (replication latency,
// record age), kept in plain atomics and exported at scrape time by the partition
// collector as a Prometheus histogram with the same name, buckets and meaning as a
// prometheus.HistogramVec child. It replaced the client library's histogram, whose
// Observe (a float conversion, a bucket search and four atomic operations, one of them
// a compare-and-swap loop on the sum) was a quarter of the ack reader's CPU: the ack
// reader now counts a run of acks in a durationCounts of its own and adds it here once
// per run (add), so a record costs no atomic operation at all.
type durationHistogram struct {
	// bounds are the buckets' upper bounds in nanoseconds (le, inclusive); counts has
	// one more entry, for +Inf. Counts are per bucket, not cumulative.
	bounds []int64
	counts []atomic.Uint64
	// sumBits is the sum of the observations in seconds, as float64 bits.
	sumBits atomic.Uint64
}

// durationBuckets are the upper bounds of a duration histogram, in seconds as the
// metric exports them and in nanoseconds as durationHistogram compares them.
type durationBuckets struct {
	seconds []float64
	nanos   []int64
}

func newDurationBuckets(seconds []float64) *durationBuckets {
	b := &durationBuckets{seconds: seconds, nanos: make([]int64, len(seconds))}
	for i, s := range seconds {
		b.nanos[i] = int64(math.Round(s * float64(time.Second)))
	}
	return b
}

func newDurationHistogram(b *durationBuckets) *durationHistogram {
	return &durationHistogram{bounds: b.nanos, counts: make([]atomic.Uint64, len(b.nanos)+1)}
}

// bucket returns the index of the bucket d falls into.
func (h *durationHistogram) bucket(d time.Duration) int {
	for i, le := range h.bounds {
		if int64(d) <= le {
			return i
		}
	}
	return len(h.bounds)
}

// observe counts one duration at once (paths with one record at a time, such as a
// committed transaction).
func (h *durationHistogram) observe(d time.Duration) {
	h.counts[h.bucket(d)].Add(1)
	h.addSum(d.Seconds())
}

// add adds what c counted and clears c. It touches only the buckets c counted in, so a
// run of one ack costs no more than observe.
func (h *durationHistogram) add(c *durationCounts) {
	if c.used == 0 {
		return
	}
	for used := c.used; used != 0; used &= used - 1 {
		i := bits.TrailingZeros32(used)
		h.counts[i].Add(c.counts[i])
		c.counts[i] = 0
	}
	h.addSum(c.sum)
	c.used, c.sum = 0, 0
}

func (h *durationHistogram) addSum(s float64) {
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+s)) {
			return
		}
	}
}

// metric returns the histogram as a Prometheus histogram of desc with labelValues. The
// count is the sum of the buckets, so count and buckets always agree; the sum may lag
// them by the add in progress.
func (h *durationHistogram) metric(desc *prometheus.Desc, b *durationBuckets, labelValues ...string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(b.seconds))
	var n uint64
	for i, le := range b.seconds {
		n += h.counts[i].Load()
		cumulative[le] = n
	}
	n += h.counts[len(b.seconds)].Load()
	return prometheus.MustNewConstHistogram(desc, n, math.Float64frombits(h.sumBits.Load()), cumulative, labelValues...)
}

// maxDurationBuckets bounds the buckets (+Inf included) a durationCounts can count: one
// bit each in used.
const maxDurationBuckets = 32

// durationCounts counts observations of one durationHistogram on one goroutine, for
// durationHistogram.add.
type durationCounts struct {
	counts [maxDurationBuckets]uint64
	// used has bit i set when counts[i] is not 0.
	used uint32
	sum  float64
}

// observe counts d in h's buckets.
func (c *durationCounts) observe(h *durationHistogram, d time.Duration) {
	i := h.bucket(d)
	c.counts[i]++
	c.used |= 1 << i
	c.sum += d.Seconds()
}
