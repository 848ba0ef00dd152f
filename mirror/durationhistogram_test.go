package mirror

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestDurationHistogramMatchesPrometheus checks that a durationHistogram exports what
// the client library's histogram with the same buckets exported for the same
// durations: the same buckets, cumulative counts, count and sum, whether the durations
// were observed one at a time or counted in runs (the ack reader's way).
func TestDurationHistogramMatchesPrometheus(t *testing.T) {
	m := newMetrics()
	tests := map[string]struct {
		buckets *durationBuckets
		desc    *prometheus.Desc
		max     time.Duration
	}{
		"latency": {buckets: m.latencyBuckets, desc: m.latency, max: 2 * time.Minute},
		"age":     {buckets: m.ageBuckets, desc: m.recordAge, max: 30 * 24 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if n := len(tc.buckets.seconds) + 1; n > maxDurationBuckets {
				t.Fatalf("%d buckets, a durationCounts counts at most %d", n, maxDurationBuckets)
			}
			want := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "want", Buckets: tc.buckets.seconds})
			one, runs := newDurationHistogram(tc.buckets), newDurationHistogram(tc.buckets)
			r := rand.New(rand.NewPCG(3, 4))
			var run durationCounts
			durations := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, time.Nanosecond}
			for range 20000 {
				// Spread over every bucket: a log-uniform duration up to tc.max.
				durations = append(durations, time.Duration(math.Exp(r.Float64()*math.Log(float64(tc.max)))))
			}
			for _, b := range tc.buckets.nanos {
				durations = append(durations, time.Duration(b), time.Duration(b+1)) // on and just past each bound
			}
			for i, d := range durations {
				want.Observe(d.Seconds())
				one.observe(d)
				run.observe(runs, d)
				if i%97 == 0 {
					runs.add(&run)
				}
			}
			runs.add(&run)
			w := histogramOf(t, want)
			for hname, h := range map[string]*durationHistogram{"observed one at a time": one, "counted in runs": runs} {
				got := histogramOf(t, h.metric(tc.desc, tc.buckets, "topic", "0"))
				if got.GetSampleCount() != w.GetSampleCount() {
					t.Errorf("%s: count %d, want %d", hname, got.GetSampleCount(), w.GetSampleCount())
				}
				if diff := math.Abs(got.GetSampleSum() - w.GetSampleSum()); diff > 1e-9*w.GetSampleSum() {
					t.Errorf("%s: sum %v, want %v", hname, got.GetSampleSum(), w.GetSampleSum())
				}
				if len(got.GetBucket()) != len(w.GetBucket()) {
					t.Fatalf("%s: %d buckets, want %d", hname, len(got.GetBucket()), len(w.GetBucket()))
				}
				for i, b := range w.GetBucket() {
					g := got.GetBucket()[i]
					if g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
						t.Errorf("%s: bucket %d is le=%v count %d, want le=%v count %d", hname, i,
							g.GetUpperBound(), g.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
					}
				}
			}
		})
	}
}

func histogramOf(t *testing.T, m prometheus.Metric) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram()
}
