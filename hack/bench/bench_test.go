package main

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestMedianAndPercentile(t *testing.T) {
	tests := map[string]struct {
		in                   []float64
		median, p50, p99, mx float64
	}{
		"empty":      {in: nil},
		"one":        {in: []float64{7}, median: 7, p50: 7, p99: 7, mx: 7},
		"odd count":  {in: []float64{3, 1, 2}, median: 2, p50: 2, p99: 3, mx: 3},
		"even count": {in: []float64{4, 1, 3, 2}, median: 2.5, p50: 2, p99: 4, mx: 4},
		"hundred": {in: func() []float64 {
			var v []float64
			for i := 100; i >= 1; i-- {
				v = append(v, float64(i))
			}
			return v
		}(), median: 50.5, p50: 50, p99: 99, mx: 100},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := median(tc.in); got != tc.median {
				t.Errorf("median = %v, want %v", got, tc.median)
			}
			if got := percentile(tc.in, 0.5); got != tc.p50 {
				t.Errorf("p50 = %v, want %v", got, tc.p50)
			}
			if got := percentile(tc.in, 0.99); got != tc.p99 {
				t.Errorf("p99 = %v, want %v", got, tc.p99)
			}
			if got := percentile(tc.in, 1); got != tc.mx {
				t.Errorf("max = %v, want %v", got, tc.mx)
			}
		})
	}
}

func histogram(buckets map[float64]uint64, count uint64) *dto.Metric {
	h := &dto.Histogram{SampleCount: proto.Uint64(count)}
	for _, le := range []float64{0.001, 0.002, 0.004, math.Inf(1)} {
		if c, ok := buckets[le]; ok {
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(c)})
		}
	}
	return &dto.Metric{Histogram: h}
}

func TestHistogramQuantile(t *testing.T) {
	// Two partitions' histograms: 10 samples <= 1 ms, 10 in (1, 2] ms, none above.
	f := &dto.MetricFamily{Metric: []*dto.Metric{
		histogram(map[float64]uint64{0.001: 5, 0.002: 10, 0.004: 10, math.Inf(1): 10}, 10),
		histogram(map[float64]uint64{0.001: 5, 0.002: 10, 0.004: 10, math.Inf(1): 10}, 10),
	}}
	tests := map[string]struct {
		q, want float64
	}{
		"median is the top of the first bucket": {q: 0.5, want: 0.001},
		"p25 interpolates in the first bucket":  {q: 0.25, want: 0.0005},
		"p75 interpolates in the second bucket": {q: 0.75, want: 0.0015},
		"p100 is the top of the last non-empty": {q: 1, want: 0.002},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := histogramQuantile(f, tc.q); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("histogramQuantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	tests := map[string]struct {
		args    []string
		check   func(o options) bool
		wantErr string
	}{
		"defaults": {args: nil, check: func(o options) bool {
			return o.records == 1_000_000 && o.bigRecords == 5_000_000 && o.rounds == 3 && o.groupsRounds == 5 && o.partitions == 8 &&
				o.valueSize == 200 && o.out == "docs/benchmarks" && len(o.throttleLimits) == 2
		}},
		"quick shrinks what was not set": {args: []string{"--quick", "--rounds", "3"}, check: func(o options) bool {
			return o.records == 100_000 && o.rounds == 3 && o.groupsRounds == 1 && o.latencyTime == 5*time.Second && strings.Contains(o.out, "kafka-mirror-bench")
		}},
		"big run must be bigger": {args: []string{"--records", "10", "--big-records", "5"}, wantErr: "--big-records"},
		"bad throttle in-flight": {args: []string{"--throttle-inflight", "10,x"}, wantErr: "--throttle-inflight"},
		"engine environment": {args: []string{"--engine-env", "GOGC=200, GOMEMLIMIT=150MiB"}, check: func(o options) bool {
			return len(o.engineEnv) == 2 && o.engineEnv[0] == "GOGC=200" && o.engineEnv[1] == "GOMEMLIMIT=150MiB"
		}},
		"producer settings of the comparison": {args: []string{"--producer-max-in-flight-requests", "5", "--baseline-producer-max-in-flight-requests", "1"}, check: func(o options) bool {
			return o.producerMaxInFlightRequests == 5 && o.baselineMaxInFlightRequests == 1
		}},
		"producer setting out of range":           {args: []string{"--producer-max-in-flight-requests", "6"}, wantErr: "--producer-max-in-flight-requests"},
		"baseline producer setting out of range":  {args: []string{"--baseline-producer-max-in-flight-requests", "-1"}, wantErr: "--baseline-producer-max-in-flight-requests"},
		"bad engine environment":                  {args: []string{"--engine-env", "GOGC"}, wantErr: "--engine-env"},
		"no records":                              {args: []string{"--records", "0"}, wantErr: "--records"},
		"quick keeps groups rounds that were set": {args: []string{"--quick", "--groups-rounds", "3"}, check: func(o options) bool { return o.groupsRounds == 3 && o.rounds == 1 }},
		"groups rounds can be skipped":            {args: []string{"--groups-rounds", "0"}, check: func(o options) bool { return o.groupsRounds == 0 }},
		"negative groups rounds":                  {args: []string{"--groups-rounds", "-1"}, wantErr: "--groups-rounds"},
		"big run can be disabled":                 {args: []string{"--big-records", "0"}, check: func(o options) bool { return o.bigRecords == 0 }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Errorf("unexpected options %+v", o)
			}
		})
	}
}

func TestReportTargets(t *testing.T) {
	eng := func(rps float64, rss int64) *engineResult {
		return &engineResult{Rate: rate{Records: int(rps), Bytes: int64(rps) * 210, Elapsed: time.Second}, MaxRSS: rss, CPUPerMillion: 5}
	}
	r := newReport(options{records: 1000, bigRecords: 5000})
	// Three identical rounds but for the engine's peak RSS: 90, 100 and 95 MiB.
	for _, rss := range []int64{90 << 20, 100 << 20, 95 << 20} {
		x := round{
			ProduceLimit: limitResult{Rate: rate{Records: 100, Elapsed: time.Second}},
			ConsumeLimit: limitResult{Rate: rate{Records: 200, Elapsed: time.Second}},
			Pipe:         limitResult{Rate: rate{Records: 100, Elapsed: time.Second}},
			Engine:       eng(90, rss), EngineFast: eng(99, 0), EngineCEL: eng(72, 0),
		}
		x.computeRatios()
		r.Rounds = append(r.Rounds, x)
	}
	// +5% over the highest 1M peak (100 MiB), +10.5% over the median (95 MiB): peaks
	// are compared with peaks.
	r.Big = eng(90, 105<<20)
	r.Big.Records = 5000
	r.Throttled = []throttleResult{{MaxInFlightPerPartition: 10, Partitions: 8, MaxInFlight: 81}}
	r.finish()
	want := map[string]bool{
		"Throughput with no-data-loss":                                       true,  // 0.90
		"Throughput with no-data-loss, against the raw pipe (supplementary)": true,  // 90 / 100
		"Cost of a CEL filter":                                               false, // 20%
		"noDataLoss: false":                                                  true,  // 1.10
		"Peak RSS at 5,000 vs 1,000 records":                                 true,  // +5%
		"Slow target, maxInFlightPerPartition 10":                            false, // 81 > 80
	}
	if len(r.Targets) != len(want) {
		t.Fatalf("got %d targets, want %d: %+v", len(r.Targets), len(want), r.Targets)
	}
	for _, tg := range r.Targets {
		met, ok := want[tg.Name]
		if !ok {
			t.Errorf("unexpected target %q", tg.Name)
			continue
		}
		if tg.Met != met {
			t.Errorf("%s: met = %v (%s), want %v", tg.Name, tg.Met, tg.Value, met)
		}
	}
	var md strings.Builder
	r.markdown(&md)
	for _, s := range []string{"| broker-bound limit (slower of the two) | 100 |", "0.90 x limit", "| Cost of a CEL filter | <= 15% of throughput | 20% (CPU per record +0%) | no |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}

func TestFmtCount(t *testing.T) {
	for in, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := fmtCount(in); got != want {
			t.Errorf("fmtCount(%d) = %q, want %q", in, got, want)
		}
	}
}
