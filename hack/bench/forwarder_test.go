package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestForwarderAgainstKfake checks that the bare forwarder copies every record once,
// into the source partition, with its key and headers, and stops cleanly.
func TestForwarderAgainstKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts, records = 4, 3000
	g := newRecordGen(100)
	src, dst := startPreloaded(ctx, t, g, parts, records, 0)
	cfg, err := engineConfig(engineSpec{name: "forwarder", noDataLoss: true}, src, dst, "test-forwarder", dataTopic, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := unquoteTopic(regexp.QuoteMeta(dataTopic)); got != dataTopic {
		t.Fatalf("unquoteTopic(QuoteMeta(%q)) = %q", dataTopic, got)
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- forward(fctx, cfg) }()

	counter, err := newTargetCounter(dst, dataTopic, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer counter.close()
	for {
		n, err := counter.sum()
		if err == nil && n >= records {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the forwarder returned before the target held every record: %v", err)
		case <-ctx.Done():
			t.Fatalf("the target holds %d of %d records (err %v)", n, records, err)
		case <-time.After(pollInterval):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("forward = %v, want nil after a stop", err)
	}
	checkCopiedOnce(ctx, t, g, counter, dst, parts, records)
}

// TestForwarderTargets checks the comparison with the forwarder: the ratios are medians
// of the rounds' own ratios, and each goal of issue 18 is judged on its side of the line.
func TestForwarderTargets(t *testing.T) {
	res := func(name string, steadyRPS float64, cpu float64, rss int64, startup, startToSteady float64) *engineResult {
		return &engineResult{Name: name, Records: 1000, Rate: rate{Records: int(steadyRPS * 100), Bytes: int64(steadyRPS*100) * 210, Elapsed: 100 * time.Second},
			CPUPerMillion: cpu, MaxRSS: rss, StartupSeconds: startup, StartToSteady: startToSteady}
	}
	r := newReport(options{records: 1000, bigRecords: 5000})
	// Engine / forwarder throughput over the rounds: 1.10, 0.95, 1.02 (median 1.02);
	// CPU 1.05, 1.20, 1.08 (median 1.08); RSS 0.9, 1.1, 1.0 (median 1.0).
	for _, x := range []struct{ tp, cpu, rss float64 }{{1.10, 1.05, 0.9}, {0.95, 1.20, 1.1}, {1.02, 1.08, 1.0}} {
		rd := round{
			ProduceLimit: limitResult{Rate: rate{Records: 100, Elapsed: time.Second}},
			ConsumeLimit: limitResult{Rate: rate{Records: 200, Elapsed: time.Second}},
			Pipe:         limitResult{Rate: rate{Records: 100, Elapsed: time.Second}},
			Engine:       res("engine", 100*x.tp, 5*x.cpu, int64(100*x.rss)<<20, 0.4, 0.93),
			EngineFast:   res("engine-fast", 100, 5, 0, 0, 0), EngineCEL: res("engine-cel", 100, 5, 0, 0, 0),
			Forwarder: res("forwarder", 100, 5, 100<<20, 0.3, 0.95),
		}
		rd.computeRatios()
		r.Rounds = append(r.Rounds, rd)
	}
	// The engine slows to 0.90 x at 5,000 records, but the forwarder to 0.92 x: the
	// brokers' slowdown, within 0.95 x of it.
	r.Big = res("big", 100*1.02*0.90, 5, 100<<20, 0.4, 0.9)
	r.BigForwarder = res("forwarder", 100*0.92, 5, 100<<20, 0.3, 0.9)
	r.finish()
	s := r.Summary
	if !near(s.EngineToForwarder, 1.02) || !near(s.EngineCPUToForwarder, 1.08) || !near(s.EngineRSSToForwarder, 1.0) {
		t.Errorf("engine/forwarder = %.3f, CPU %.3f, RSS %.3f; want 1.02, 1.08, 1.00", s.EngineToForwarder, s.EngineCPUToForwarder, s.EngineRSSToForwarder)
	}
	if !near(s.BigToEngine, 0.90) || !near(s.BigForwarderToForwarder, 0.92) {
		t.Errorf("big/1M = %.3f, forwarder %.3f; want 0.90, 0.92", s.BigToEngine, s.BigForwarderToForwarder)
	}
	want := map[string]bool{
		"Throughput against the bare forwarder":                true,
		"CPU per record against the bare forwarder":            true,
		"Peak RSS at 1,000 records against the bare forwarder": true,
		"First record mirrored after the start":                true,
		"Rate from the start to the last record":               true,
		"Rate at 5,000 vs 1,000 records":                       true,
	}
	seen := 0
	for _, tg := range r.Targets {
		met, ok := want[tg.Name]
		if !ok {
			continue
		}
		seen++
		if tg.Met != met {
			t.Errorf("%s: met = %v (%s), want %v", tg.Name, tg.Met, tg.Value, met)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d forwarder targets: %+v", seen, len(want), r.Targets)
	}
	// A slower engine misses the throughput goal.
	r.Rounds[2].Engine.Rate.Records = 9900
	r.Rounds[0].Engine.Rate.Records = 9000
	for i := range r.Rounds {
		r.Rounds[i].computeRatios()
	}
	r.Targets = nil
	r.finish()
	for _, tg := range r.Targets {
		if tg.Name == "Throughput against the bare forwarder" && tg.Met {
			t.Errorf("throughput 0.99 x the forwarder met the goal: %s", tg.Value)
		}
	}
}

func near(a, b float64) bool { return a > b-0.005 && a < b+0.005 }

// TestForwarderChildCommandLine checks the command line both forwarders take, the
// engine's: `run --config FILE` with the log flags accepted and ignored.
func TestForwarderChildCommandLine(t *testing.T) {
	cfg, err := engineConfig(engineSpec{name: "forwarder", noDataLoss: true}, []string{"source:9092"}, []string{"target:9092"}, "test-forwarder", dataTopic, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := testutil.WriteFile(t, t.TempDir(), "forwarder.yaml", string(data))
	var got *config.Config
	err = runForwarderChild([]string{"run", "--config", path, "--log-format", "json", "--log-level", "info"}, func(ctx context.Context, c *config.Config) error {
		got = c
		return ctx.Err()
	})
	if err != nil || got == nil || got.ConsumerGroup != "test-forwarder" || got.Topics.Include[0] != cfg.Topics.Include[0] {
		t.Fatalf("runForwarderChild = %v, config %+v; want the config of %s", err, got, path)
	}
	for _, args := range [][]string{nil, {"--config", path}, {"run", "--config", path, "--bogus"}} {
		if err := runForwarderChild(args, func(context.Context, *config.Config) error { return nil }); err == nil {
			t.Errorf("runForwarderChild(%q) = nil, want an error", args)
		}
	}
}
