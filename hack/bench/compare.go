package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
	if b.o.profile {
		if err := b.compareProfiles(ctx, spec); err != nil {
			return err
		}
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

// compareProfiles runs this checkout's engine profiled at the engine arm's and the
// baseline arm's producer.maxInFlightRequests (--profile with --baseline-bin: the
// settings, not the binaries, are compared) and prints their CPU breakdowns side by side.
func (b *bench) compareProfiles(ctx context.Context, spec func(string) engineSpec) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("while locating the benchmark binary: %w", err)
	}
	dir := b.o.out
	if dir == "" {
		dir = b.workDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var bds [2]cpuBreakdown
	for i, name := range []string{"engine", "baseline"} {
		prof := filepath.Join(dir, name+"-cpu.prof")
		bin := []string{self, profiledEngineCommand, "--cpu", prof,
			"--allocs", filepath.Join(dir, name+"-allocs.prof"), "--heap", filepath.Join(dir, name+"-heap.prof"),
			"--mutex", filepath.Join(dir, name+"-mutex.prof")}
		if _, err := b.engineRun(ctx, spec(name), bin, b.o.records, syscall.SIGUSR1); err != nil {
			return err
		}
		if bds[i], err = readBreakdown(ctx, prof); err != nil {
			return err
		}
		b.logf("  %s CPU profile: %s", name, prof)
	}
	fmt.Println("\nengine (--producer-max-in-flight-requests) against baseline (--baseline-producer-max-in-flight-requests), both this checkout:")
	breakdownMarkdown(os.Stdout, bds[0], bds[1], b.o.records)
	return nil
}
