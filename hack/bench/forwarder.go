package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// forwarderCommand is the hidden first argument with which the benchmark re-runs itself
// as the bare forwarder: the reference the engine is held to (issue 18). It takes the
// engine's command line (`run --config FILE ...`), so that it is started, fed, watched,
// stopped and measured exactly as the engine is (engineRun): same config, same target
// counter, same CPU and peak-RSS sampling.
const forwarderCommand = "forwarder"

// runForwarder is the child side: one sarama consumer group member with the engine's
// consumer settings (kafka.ConsumerConfig) that hands every record to one async
// producer with the engine's producer settings (kafka.ProducerConfig: idempotent,
// acks=all, one open request per broker, the manual partitioner). Nothing else: no
// offset tracking, no commits, no handler, no metrics, no topic checks, no drain. It
// runs until SIGTERM and fails on the first send error.
//
//	bench forwarder run --config FILE [--log-format X --log-level Y]
func runForwarder(args []string) error {
	fs := flag.NewFlagSet(forwarderCommand, flag.ContinueOnError)
	cpuPath := fs.String("cpu", "", "write a CPU profile of the whole run to this file (make bench PROFILE=1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runForwarderChild(fs.Args(), func(ctx context.Context, cfg *config.Config) error {
		if *cpuPath == "" {
			return forward(ctx, cfg)
		}
		f, err := os.Create(*cpuPath)
		if err != nil {
			return fmt.Errorf("while creating the forwarder's CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("while starting the forwarder's CPU profile: %w", err)
		}
		runErr := forward(ctx, cfg)
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("while writing the forwarder's CPU profile: %w", err)
		}
		return runErr
	})
}

// runForwarderChild is the child side both reference forwarders share (this one and
// the franz-go one, kgoForwarderCommand): it takes the engine's command line (`run
// --config FILE`, the log flags ignored, as a forwarder does not log), loads the config
// and runs forward on it until SIGTERM or an interrupt.
func runForwarderChild(args []string, forward func(context.Context, *config.Config) error) error {
	run := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := run.String("config", "", "the MirrorConfig file")
	run.String("log-format", "", "ignored: the forwarder does not log")
	run.String("log-level", "", "ignored: the forwarder does not log")
	if len(args) == 0 || args[0] != "run" {
		return errors.New("expected `run --config FILE`")
	}
	if err := run.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop, cfg, err := loadChildConfig(*cfgPath)
	if err != nil {
		return err
	}
	defer stop()
	return forward(ctx, cfg)
}

// loadChildConfig loads the MirrorConfig at path for a child mode of the benchmark (a
// forwarder, a limit measurement) and returns a context that ends on SIGTERM, which
// stops the child as it stops the engine, or on an interrupt. stop releases it.
func loadChildConfig(path string) (ctx context.Context, stop context.CancelFunc, cfg *config.Config, err error) {
	if cfg, err = config.Load(path); err != nil {
		return nil, nil, nil, err
	}
	ctx, stop = signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	return ctx, stop, cfg, nil
}

// forward is the forwarder's loop: cfg names the source, the target, the group and the
// topic (its include pattern is the quoted topic name engineConfig writes).
func forward(ctx context.Context, cfg *config.Config) error {
	cc, err := kafka.ConsumerConfig(cfg)
	if err != nil {
		return fmt.Errorf("while configuring the forwarder's consumer: %w", err)
	}
	pc, err := kafka.ProducerConfig(cfg)
	if err != nil {
		return fmt.Errorf("while configuring the forwarder's producer: %w", err)
	}
	p, err := sarama.NewAsyncProducer(cfg.Target.BootstrapServers, pc)
	if err != nil {
		return fmt.Errorf("while creating the forwarder's producer: %w", err)
	}
	group, err := sarama.NewConsumerGroup(cfg.Source.BootstrapServers, cfg.ConsumerGroup, cc)
	if err != nil {
		_ = p.Close()
		return fmt.Errorf("while creating the forwarder's consumer group: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for range p.Successes() {
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			cancel(fmt.Errorf("while producing to the target: %w", e.Err))
		}
	}()
	go func() {
		defer wg.Done()
		for range group.Errors() {
		}
	}()
	h := forwardHandler{in: p.Input()}
	topic := unquoteTopic(cfg.Topics.Include[0])
	for ctx.Err() == nil {
		if err := group.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
			cancel(fmt.Errorf("while consuming: %w", err))
		}
	}
	_ = group.Close()
	p.AsyncClose()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// forwardHandler copies each claimed record into a new producer message, as the raw
// pipe does (pipeLimit), and hands it to the producer.
type forwardHandler struct {
	in chan<- *sarama.ProducerMessage
}

func (forwardHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (forwardHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h forwardHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	done := sess.Context().Done()
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case h.in <- forwarded(m):
			case <-done:
				return nil
			}
		case <-done:
			return nil
		}
	}
}

// unquoteTopic undoes regexp.QuoteMeta on the topic name engineConfig writes as the
// include pattern (benchmark topic names hold only dots as metacharacters).
func unquoteTopic(pattern string) string {
	out := make([]byte, 0, len(pattern))
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '\\' && i+1 < len(pattern) {
			i++
		}
		out = append(out, pattern[i])
	}
	return string(out)
}

// forwarder mirrors the first n records of the data topic into a fresh target with the
// bare forwarder as a child process, measured as engineThroughput measures the engine.
func (b *bench) forwarder(ctx context.Context, n int) (engineResult, error) {
	self, err := os.Executable()
	if err != nil {
		return engineResult{}, fmt.Errorf("while locating the benchmark binary: %w", err)
	}
	spec := engineSpec{name: "forwarder", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}
	return b.engineRun(ctx, spec, []string{self, forwarderCommand}, n, 0)
}

// bigForwarder is forwarder over the big run's records, so that a slowdown of the
// engine at that count can be told from the brokers'.
func (b *bench) bigForwarder(ctx context.Context) (*engineResult, error) {
	res, err := b.forwarder(ctx, b.o.bigRecords)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Goals of issue 18, the engine against the bare forwarder.
const (
	goalToForwarder    = 1.0  // throughput, engine / forwarder, at least
	goalCPUToForwarder = 1.1  // CPU per record, engine / forwarder, at most
	goalRSSToForwarder = 1.0  // peak RSS at --records, engine / forwarder, at most
	goalFirstRecord    = 1.0  // seconds from the start to the first record mirrored, at most
	goalStartToSteady  = 0.9  // start-to-last rate / steady rate, at least
	goalBigToNormal    = 0.95 // the big run's rate / the --records rate, at least
	goalBigAsForwarder = 0.95 // ...or at least this share of the forwarder's own ratio
)

// finishForwarder fills the summary's comparison with the forwarder and its targets.
func (r *report) finishForwarder() {
	if len(r.Rounds) == 0 || r.Rounds[0].Forwarder == nil || r.Rounds[0].Engine == nil {
		return
	}
	s := &r.Summary
	s.EngineToForwarder = medianOf(r.Rounds, func(x round) float64 { return x.EngineToForwarder })
	s.EngineCPUToForwarder = medianOf(r.Rounds, func(x round) float64 { return x.EngineCPUToForwarder })
	s.EngineRSSToForwarder = medianOf(r.Rounds, func(x round) float64 { return x.EngineRSSToForwarder })
	s.Forwarder = medianOf(r.Rounds, func(x round) float64 { return x.Forwarder.Rate.RecordsPerSecond() })
	s.ForwarderCPU = medianOf(r.Rounds, func(x round) float64 { return x.Forwarder.CPUPerMillion })
	s.EngineAnonToForwarder = medianOf(r.Rounds, func(x round) float64 { return x.EngineAnonToForwarder })
	for _, x := range r.Rounds {
		s.ForwarderMaxRSS = max(s.ForwarderMaxRSS, x.Forwarder.MaxRSS)
		s.EngineMaxAnonRSS = max(s.EngineMaxAnonRSS, x.Engine.MaxAnonRSS)
		s.ForwarderMaxAnonRSS = max(s.ForwarderMaxAnonRSS, x.Forwarder.MaxAnonRSS)
	}
	s.EngineStartup = medianOf(r.Rounds, func(x round) float64 { return x.Engine.StartupSeconds })
	s.ForwarderStartup = medianOf(r.Rounds, func(x round) float64 { return x.Forwarder.StartupSeconds })
	s.EngineStartToSteady = medianOf(r.Rounds, func(x round) float64 { return x.Engine.StartToSteady })
	s.ForwarderStartToSteady = medianOf(r.Rounds, func(x round) float64 { return x.Forwarder.StartToSteady })
	if r.Big != nil && s.Engine > 0 {
		s.BigToEngine = r.Big.Rate.RecordsPerSecond() / s.Engine
	}
	if r.BigForwarder != nil && s.Forwarder > 0 {
		s.BigForwarderToForwarder = r.BigForwarder.Rate.RecordsPerSecond() / s.Forwarder
	}
	r.Targets = append(r.Targets,
		target{"Throughput against the bare forwarder", fmt.Sprintf(">= %.2f x the forwarder", goalToForwarder),
			fmt.Sprintf("%.2f x", s.EngineToForwarder), s.EngineToForwarder >= goalToForwarder},
		target{"CPU per record against the bare forwarder", fmt.Sprintf("<= %.2f x the forwarder", goalCPUToForwarder),
			fmt.Sprintf("%.2f x", s.EngineCPUToForwarder), s.EngineCPUToForwarder <= goalCPUToForwarder},
		target{fmt.Sprintf("Peak RSS at %s records against the bare forwarder", fmtCount(r.Settings.Records)), fmt.Sprintf("<= %.2f x the forwarder", goalRSSToForwarder),
			fmt.Sprintf("%.2f x (highest over the rounds: %s vs %s)", s.EngineRSSToForwarder, fmtBytes(s.MaxRSS), fmtBytes(s.ForwarderMaxRSS)), s.EngineRSSToForwarder <= goalRSSToForwarder},
		target{fmt.Sprintf("Peak anonymous RSS at %s records against the bare forwarder (supplementary: without the binaries' file-backed pages)", fmtCount(r.Settings.Records)),
			fmt.Sprintf("<= %.2f x the forwarder", goalRSSToForwarder),
			fmt.Sprintf("%.2f x (highest over the rounds: %s vs %s)", s.EngineAnonToForwarder, fmtBytes(s.EngineMaxAnonRSS), fmtBytes(s.ForwarderMaxAnonRSS)),
			s.EngineAnonToForwarder > 0 && s.EngineAnonToForwarder <= goalRSSToForwarder},
		target{"First record mirrored after the start", fmt.Sprintf("<= %.1f s (a new group, no previous members)", goalFirstRecord),
			fmt.Sprintf("%.2f s (forwarder %.2f s)", s.EngineStartup, s.ForwarderStartup), s.EngineStartup <= goalFirstRecord},
		target{"Rate from the start to the last record", fmt.Sprintf(">= %.2f x the steady rate (%.0f%%-%.0f%% of the records)", goalStartToSteady, steadyFrom*100, steadyTo*100),
			fmt.Sprintf("%.2f x (forwarder %.2f x)", s.EngineStartToSteady, s.ForwarderStartToSteady), s.EngineStartToSteady >= goalStartToSteady},
	)
	if s.BigToEngine > 0 && s.BigForwarderToForwarder > 0 {
		r.Targets = append(r.Targets, target{
			fmt.Sprintf("Rate at %s vs %s records", fmtCount(r.Settings.BigRecords), fmtCount(r.Settings.Records)),
			fmt.Sprintf(">= %.2f x, or >= %.2f x the forwarder's own slowdown (the brokers')", goalBigToNormal, goalBigAsForwarder),
			fmt.Sprintf("%.2f x (forwarder %.2f x)", s.BigToEngine, s.BigForwarderToForwarder),
			s.BigToEngine >= goalBigToNormal || s.BigToEngine >= goalBigAsForwarder*s.BigForwarderToForwarder,
		})
	}
}

// forwarderRows are the results table's rows of the forwarder comparison.
func (r *report) forwarderRows() [][]string {
	s := r.Summary
	if s.Forwarder == 0 {
		return nil
	}
	rows := [][]string{
		{"bare forwarder: sarama consumer group -> the engine's producer settings, nothing else", fmtNum(s.Forwarder), "", "",
			fmt.Sprintf("%.2f", s.ForwarderCPU), fmtBytes(s.ForwarderMaxRSS)},
		{"engine vs bare forwarder (engine_vs_forwarder; CPU per record; peak RSS)", "", "",
			fmt.Sprintf("%.2f x forwarder", s.EngineToForwarder), fmt.Sprintf("%.2f x forwarder", s.EngineCPUToForwarder), fmt.Sprintf("%.2f x forwarder", s.EngineRSSToForwarder)},
	}
	if f := r.BigForwarder; f != nil {
		rows = append(rows, []string{fmt.Sprintf("bare forwarder, %s records", fmtCount(f.Records)), fmtNum(f.Rate.RecordsPerSecond()), "", "",
			fmt.Sprintf("%.2f", f.CPUPerMillion), fmtBytes(f.MaxRSS)})
	}
	return rows
}

// forwarderMarkdown writes the rounds of the forwarder comparison.
func (r *report) forwarderMarkdown(w io.Writer) {
	if r.Summary.Forwarder == 0 {
		return
	}
	fmt.Fprintf(w, "\n## Against the bare forwarder\n\nThe engine and the forwarder run the same way (a child process on the same config, a fresh target, "+
		"a new consumer group, the target's end offsets polled every %v). Steady is the rate between %.0f%% and %.0f%% of the records; "+
		"start-to-last is the records over the time from the process's start to the last record.\n\n", pollInterval, steadyFrom*100, steadyTo*100)
	t := [][]string{{"round", "run", "first-to-last records/s", "steady records/s", "start-to-last / steady", "first record after", "CPU s / M records", "peak RSS", "peak anonymous RSS"}}
	for _, x := range r.Rounds {
		for _, e := range []*engineResult{x.Engine, x.Forwarder} {
			if e == nil {
				continue
			}
			t = append(t, []string{fmt.Sprint(x.Round), e.Name, fmtNum(e.Rate.RecordsPerSecond()), fmtNum(e.SteadyRate.RecordsPerSecond()),
				fmt.Sprintf("%.2f", e.StartToSteady), fmt.Sprintf("%.2f s", e.StartupSeconds), fmt.Sprintf("%.2f", e.CPUPerMillion), fmtBytes(e.MaxRSS), fmtBytes(e.MaxAnonRSS)})
		}
	}
	for _, e := range []*engineResult{r.Big, r.BigForwarder} {
		if e != nil {
			t = append(t, []string{"big", e.Name, fmtNum(e.Rate.RecordsPerSecond()), fmtNum(e.SteadyRate.RecordsPerSecond()),
				fmt.Sprintf("%.2f", e.StartToSteady), fmt.Sprintf("%.2f s", e.StartupSeconds), fmt.Sprintf("%.2f", e.CPUPerMillion), fmtBytes(e.MaxRSS), fmtBytes(e.MaxAnonRSS)})
		}
	}
	writeMarkdownTable(w, t)
}

// forwarded is m as the forwarder and the raw pipe write it: same topic, partition,
// timestamp, key, value and headers, nothing else.
func forwarded(m *sarama.ConsumerMessage) *sarama.ProducerMessage {
	out := &sarama.ProducerMessage{
		Topic: m.Topic, Partition: m.Partition, Timestamp: m.Timestamp,
		Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(m.Value),
		Headers: make([]sarama.RecordHeader, len(m.Headers)),
	}
	for i, h := range m.Headers {
		out.Headers[i] = *h
	}
	return out
}
