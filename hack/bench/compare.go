package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// compareRuns measures the engine built from this checkout against the baseline engine
// binary --baseline-bin and the bare forwarder, alternated round by round, and prints
// the ratios: the before/after numbers of an engine change, taken in one run so that
// the shared machine's load falls on both sides alike. Nothing is written to --out.
func (b *bench) compareRuns(ctx context.Context) error {
	base, err := filepath.Abs(b.o.baselineBin)
	if err != nil {
		return err
	}
	n := b.o.records
	spec := func(name string) engineSpec {
		s := engineSpec{name: name, noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}
		s.maxInFlightRequests = b.o.producerMaxInFlightRequests
		if name == "baseline" {
			s.maxInFlightRequests = b.o.baselineMaxInFlightRequests
		}
		return s
	}
	type trio struct{ engine, baseline, forwarder engineResult }
	var rounds []trio
	for i := 0; i < b.o.rounds; i++ {
		var t trio
		steps := []func() error{
			func() (err error) { t.engine, err = b.engineRun(ctx, spec("engine"), b.engineBin, n, 0); return err },
			func() (err error) {
				t.baseline, err = b.engineRun(ctx, spec("baseline"), []string{base}, n, 0)
				return err
			},
			func() (err error) { t.forwarder, err = b.forwarder(ctx, n); return err },
		}
		for j := range steps {
			if err := steps[(i+j)%len(steps)](); err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
		}
		rounds = append(rounds, t)
	}
	ratio := func(f func(trio) (float64, float64)) float64 {
		return medianOf(rounds, func(t trio) float64 {
			a, b := f(t)
			if b == 0 {
				return 0
			}
			return a / b
		})
	}
	rps := func(e engineResult) float64 { return e.Rate.RecordsPerSecond() }
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nmedians of %d rounds\tthroughput\tCPU per record\tpeak RSS\tpeak anonymous RSS\n", len(rounds))
	for _, row := range []struct {
		name string
		a, b func(trio) engineResult
	}{
		{"engine / baseline", func(t trio) engineResult { return t.engine }, func(t trio) engineResult { return t.baseline }},
		{"engine / forwarder", func(t trio) engineResult { return t.engine }, func(t trio) engineResult { return t.forwarder }},
		{"baseline / forwarder", func(t trio) engineResult { return t.baseline }, func(t trio) engineResult { return t.forwarder }},
	} {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\n", row.name,
			ratio(func(t trio) (float64, float64) { return rps(row.a(t)), rps(row.b(t)) }),
			ratio(func(t trio) (float64, float64) { return row.a(t).CPUPerMillion, row.b(t).CPUPerMillion }),
			ratio(func(t trio) (float64, float64) { return float64(row.a(t).MaxRSS), float64(row.b(t).MaxRSS) }),
			ratio(func(t trio) (float64, float64) { return float64(row.a(t).MaxAnonRSS), float64(row.b(t).MaxAnonRSS) }))
	}
	return tw.Flush()
}
