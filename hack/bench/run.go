package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Topics of the source cluster.
const (
	dataTopic    = "bench.records"
	latencyTopic = "bench.latency"
)

// celFilter is the filter of the CEL run. No benchmark record carries the header, so the
// filter is evaluated on every record and keeps all of them: the run writes the same
// records as the others and its difference is the cost of evaluating the filter.
const celFilter = "!('skip' in record.headers)"

// bench holds what the measurements share: the source cluster with its preloaded
// topics, the engine binary and a scratch directory for configs and logs.
type bench struct {
	o          options
	gen        *recordGen
	source     *kfake.Cluster
	srcBrokers []string
	srcAdmin   sarama.ClusterAdmin
	engineBin  []string
	workDir    string
	started    time.Time
	seq        int
}

func run(ctx context.Context, o options) error {
	b := &bench{o: o, gen: newRecordGen(o.valueSize), started: time.Now()}
	workDir, err := os.MkdirTemp("", "kafka-mirror-bench-")
	if err != nil {
		return fmt.Errorf("while creating a scratch directory: %w", err)
	}
	b.workDir = workDir
	keep := o.keepLogs
	defer func() {
		if keep {
			fmt.Printf("Engine configs and logs kept in %s\n", workDir)
			return
		}
		_ = os.RemoveAll(workDir)
	}()

	rep := newReport(o)
	defer b.close()
	if o.latencyOnly {
		return b.acrossRegionsOnly(ctx)
	}
	if o.kafka == "real" {
		if err := b.realKafka(ctx); err != nil {
			keep = true
			return err
		}
		return nil
	}
	if err := b.setup(ctx); err != nil {
		return err
	}
	if o.baselineBin != "" {
		return b.compareRuns(ctx)
	}
	if err := b.measure(ctx, rep); err != nil {
		keep = true
		return err
	}
	if o.distance && !o.skipEngine {
		res, err := b.acrossRegions(ctx)
		if err != nil {
			keep = true
			return err
		}
		if err := writeDistance(o.out, o, res); err != nil {
			return err
		}
		writeDistanceMarkdown(os.Stdout, o, res)
	}
	rep.finish()
	rep.print(os.Stdout)
	if err := rep.write(o.out); err != nil {
		return err
	}
	fmt.Printf("Wrote %s and %s\n", filepath.Join(o.out, "results.json"), filepath.Join(o.out, "results.md"))
	return nil
}

// acrossRegionsOnly is --latency-only: the engine is built and the across-regions
// section runs alone.
func (b *bench) acrossRegionsOnly(ctx context.Context) error {
	bin, err := b.buildEngine(ctx)
	if err != nil {
		return err
	}
	b.engineBin = []string{bin}
	res, err := b.acrossRegions(ctx)
	if err != nil {
		return err
	}
	writeDistanceMarkdown(os.Stdout, b.o, res)
	if err := writeDistance(b.o.out, b.o, res); err != nil {
		return err
	}
	fmt.Printf("Wrote %s and %s\n", filepath.Join(b.o.out, distanceFile+".json"), filepath.Join(b.o.out, distanceFile+".md"))
	return nil
}

// setup builds the engine, starts the source cluster and preloads the data topic.
func (b *bench) setup(ctx context.Context) error {
	if !b.o.skipEngine {
		bin, err := b.buildEngine(ctx)
		if err != nil {
			return err
		}
		b.engineBin = []string{bin}
	}
	src, err := startCluster("bench-source", b.o.brokers, 0)
	if err != nil {
		return err
	}
	b.source, b.srcBrokers = src, src.ListenAddrs()
	b.srcAdmin, err = kafka.NewClusterAdmin(config.Cluster{BootstrapServers: b.srcBrokers}, kafka.WithRole(kafka.RoleSource))
	if err != nil {
		return err
	}
	for _, t := range []string{dataTopic, latencyTopic} {
		if err := b.srcAdmin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: int32(b.o.partitions), ReplicationFactor: -1}, false); err != nil {
			return fmt.Errorf("while creating source topic %q: %w", t, err)
		}
	}
	b.logf("Preloading %d records of %d bytes into %d partitions", b.o.records, b.o.valueSize, b.o.partitions)
	d, err := preload(ctx, b.srcBrokers, b.gen, dataTopic, int32(b.o.partitions), 0, b.o.records)
	if err != nil {
		return err
	}
	b.logf("Preloaded in %s (%.0f records/s)", d.Round(time.Millisecond), float64(b.o.records)/d.Seconds())
	return nil
}

func (b *bench) close() {
	if b.srcAdmin != nil {
		_ = b.srcAdmin.Close()
	}
	if b.source != nil {
		b.source.Close()
	}
}

// buildEngine builds kafka-mirror from this checkout, or returns --engine-bin.
func (b *bench) buildEngine(ctx context.Context) (string, error) {
	if b.o.engineBin != "" {
		return filepath.Abs(b.o.engineBin)
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("while locating the module: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(b.workDir, "kafka-mirror")
	b.logf("Building the engine (go build -o %s .)", bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("while building the engine: %w\n%s", err, msg)
	}
	return bin, nil
}

// measure runs every measurement in order and fills rep.
func (b *bench) measure(ctx context.Context, rep *report) error {
	if err := b.throughputRounds(ctx, rep); err != nil {
		return err
	}
	if b.o.skipEngine {
		return nil
	}
	if err := b.groupsCost(ctx, rep); err != nil {
		return err
	}
	if b.o.latencyTime > 0 {
		lat, err := b.latency(ctx)
		if err != nil {
			return err
		}
		rep.Latency = &lat
	}
	if err := b.measureExactlyOnce(ctx, rep); err != nil {
		return err
	}
	if b.o.bigRecords > 0 {
		more := b.o.bigRecords - b.o.records
		b.logf("Topping the source topic up by %d records to %d", more, b.o.bigRecords)
		if _, err := preload(ctx, b.srcBrokers, b.gen, dataTopic, int32(b.o.partitions), b.o.records, more); err != nil {
			return err
		}
		res, err := b.engineThroughput(ctx, engineSpec{name: "big", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}, b.o.bigRecords)
		if err != nil {
			return err
		}
		rep.Big = &res
		if rep.BigForwarder, err = b.bigForwarder(ctx); err != nil {
			return err
		}
	}
	if b.o.throttleTime > 0 {
		for _, limit := range b.o.throttleLimits {
			res, err := b.throttled(ctx, limit)
			if err != nil {
				return err
			}
			rep.Throttled = append(rep.Throttled, res)
		}
	}
	if b.o.throttleTime > 0 && b.o.largeRecords > 0 {
		res, err := b.large(ctx)
		if err != nil {
			return err
		}
		rep.Large = &res
	}
	if b.o.profile {
		prof, err := b.profiledRun(ctx)
		if err != nil {
			return err
		}
		rep.Profile = &prof
	}
	return nil
}

// throughputRounds alternates the throughput measurements: each round runs the produce
// limit, the consume limit and the three engine variants, starting one step later than
// the round before, so that a slow phase of the shared machine does not always hit the
// same measurement.
func (b *bench) throughputRounds(ctx context.Context, rep *report) error {
	n := b.o.records
	type step struct {
		name string
		run  func(r *round) error
	}
	steps := []step{
		{"produce limit", func(r *round) (err error) { r.ProduceLimit, err = b.produceLimit(ctx, n, true); return err }},
		{"produce limit, noDataLoss: false", func(r *round) (err error) { r.ProduceFastLimit, err = b.produceLimit(ctx, n, false); return err }},
		{"consume limit", func(r *round) (err error) { r.ConsumeLimit, err = b.consumeLimit(ctx, n); return err }},
		{"raw pipe", func(r *round) (err error) { r.Pipe, err = b.pipe(ctx, n); return err }},
		{"forwarder", func(r *round) error { res, err := b.forwarder(ctx, n); r.Forwarder = &res; return err }},
	}
	if !b.o.skipEngine {
		steps = append(steps,
			step{"engine", func(r *round) error {
				res, err := b.engineThroughput(ctx, engineSpec{name: "engine", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}, n)
				r.Engine = &res
				return err
			}},
			step{"engine, noDataLoss: false", func(r *round) error {
				res, err := b.engineThroughput(ctx, engineSpec{name: "engine-fast", noDataLoss: false, streams: b.o.streams, maxInFlight: b.o.maxInFlight}, n)
				r.EngineFast = &res
				return err
			}},
			step{"engine with CEL filter", func(r *round) error {
				res, err := b.engineThroughput(ctx, engineSpec{name: "engine-cel", noDataLoss: true, filter: celFilter, streams: b.o.streams, maxInFlight: b.o.maxInFlight}, n)
				r.EngineCEL = &res
				return err
			}},
		)
	}
	for i := 0; i < b.o.rounds; i++ {
		r := &round{Round: i + 1}
		for j := range steps {
			s := steps[(i+j)%len(steps)]
			if err := s.run(r); err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, s.name, err)
			}
		}
		r.computeRatios()
		rep.Rounds = append(rep.Rounds, *r)
		b.logf("Round %d: %s", i+1, r.summary())
	}
	return nil
}

// produceLimit measures the raw produce rate into a fresh target, in a child process,
// with the producer settings of the no-data-loss policy or of `noDataLoss: false`.
func (b *bench) produceLimit(ctx context.Context, n int, noDataLoss bool) (limitResult, error) {
	var res limitResult
	err := b.withTarget(ctx, "produce-limit", 0, dataTopic, func(target []string) error {
		var err error
		res, err = b.limit(ctx, "produce", target, n, noDataLoss)
		return err
	})
	return res, err
}

// pipe measures the raw consume-to-produce pipe into a fresh target, in a child process.
func (b *bench) pipe(ctx context.Context, n int) (limitResult, error) {
	var res limitResult
	err := b.withTarget(ctx, "pipe", 0, dataTopic, func(target []string) error {
		var err error
		res, err = b.limit(ctx, "pipe", target, n, true)
		return err
	})
	return res, err
}

// consumeLimit measures the raw consume rate from the source, in a child process.
func (b *bench) consumeLimit(ctx context.Context, n int) (limitResult, error) {
	// The consume child never connects to the target; the address only makes a valid config.
	return b.limit(ctx, "consume", []string{"127.0.0.1:9"}, n, true)
}

func (b *bench) limit(ctx context.Context, mode string, target []string, n int, noDataLoss bool) (limitResult, error) {
	b.seq++
	cfg := &config.Config{
		Source:        config.Cluster{BootstrapServers: b.srcBrokers},
		Target:        config.Cluster{BootstrapServers: target},
		ConsumerGroup: "bench-limit",
		Topics:        config.Topics{Include: []string{regexp.QuoteMeta(dataTopic)}},
		NoDataLoss:    config.BoolPtr(noDataLoss),
	}
	cfg.Default()
	r, u, err := b.limitChild(ctx, mode, cfg, n)
	if err != nil {
		return limitResult{}, err
	}
	res := limitResult{Rate: r, CPUPerMillion: u.CPU.Seconds() / float64(n) * 1e6, MaxRSS: u.MaxRSS}
	if mode == "pipe" {
		b.logf("  raw pipe: %s, %.2f CPU s per million records, peak RSS %s", fmtRate(r), res.CPUPerMillion, fmtBytes(u.MaxRSS))
		return res, nil
	}
	b.logf("  %s limit%s: %s, %.2f CPU s per million records, peak RSS %s", mode, map[bool]string{false: " (noDataLoss: false)"}[noDataLoss],
		fmtRate(r), res.CPUPerMillion, fmtBytes(u.MaxRSS))
	return res, nil
}

// withTarget starts a fresh target cluster (throttled when bytesPerSecond > 0), creates
// topic on it the way the engine and the operator do (topics.Syncer, the source's
// partition count), runs fn and stops the cluster. A fresh target per run keeps runs
// from seeing each other's records and frees their memory.
func (b *bench) withTarget(ctx context.Context, name string, bytesPerSecond int64, topic string, fn func(target []string) error) error {
	b.seq++
	tgt, err := startCluster(fmt.Sprintf("bench-target-%d-%s", b.seq, name), b.o.brokers, bytesPerSecond)
	if err != nil {
		return err
	}
	defer tgt.Close()
	brokers := tgt.ListenAddrs()
	admin, err := kafka.NewClusterAdmin(config.Cluster{BootstrapServers: brokers}, kafka.WithRole(kafka.RoleTarget))
	if err != nil {
		return err
	}
	sel, err := topics.NewSelector(config.Topics{Include: []string{regexp.QuoteMeta(topic)}})
	if err != nil {
		_ = admin.Close()
		return err
	}
	r, err := topics.NewSyncer(b.srcAdmin, admin, sel, topics.SyncOptions{}).Sync(ctx)
	_ = admin.Close()
	if err != nil {
		return fmt.Errorf("while creating the target topic: %w", err)
	}
	if r.Created != 1 {
		return fmt.Errorf("while creating the target topic: the sync created %d topics (report %+v)", r.Created, r.Topics)
	}
	return fn(brokers)
}

// runName numbers the engine runs so that their configs, logs and consumer groups differ.
func (b *bench) runName(name string) string { return fmt.Sprintf("%02d-%s", b.seq, name) }

// runTimeout bounds one engine run: far more than a healthy run takes (it allows for
// 5,000 records/s, some thirty times slower than this machine mirrors), so that only a
// stuck engine hits it.
func (b *bench) runTimeout(records int) time.Duration {
	return 2*time.Minute + time.Duration(records)*200*time.Microsecond
}

// engineThroughput mirrors the first want records of the data topic into a fresh target
// with the engine as a child process and measures its rate, CPU time and peak RSS.
func (b *bench) engineThroughput(ctx context.Context, spec engineSpec, want int) (engineResult, error) {
	return b.engineRun(ctx, spec, b.engineBin, want, 0)
}

// engineRun is engineThroughput with the engine command bin, sending halfSignal (when
// not 0) to the engine when half of the records have arrived.
func (b *bench) engineRun(ctx context.Context, spec engineSpec, bin []string, want int, halfSignal syscall.Signal) (engineResult, error) {
	res := engineResult{Name: spec.name, Records: want}
	err := b.withTarget(ctx, spec.name, 0, dataTopic, func(target []string) error {
		counter, err := newTargetCounter(target, dataTopic, int32(b.o.partitions))
		if err != nil {
			return err
		}
		defer counter.close()
		p, _, err := b.launch(bin, spec, spec.name, dataTopic, target)
		if err != nil {
			return err
		}
		var onHalf func()
		if halfSignal != 0 {
			onHalf = func() { _ = p.Signal(halfSignal) }
		}
		wctx, cancel := context.WithTimeout(ctx, b.runTimeout(want))
		pr, err := waitForRecords(wctx, p, counter, int64(want), spec.partial, onHalf)
		cancel()
		if err != nil {
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return fmt.Errorf("while waiting for the %s run (log %s): %w", spec.name, p.LogPath(), err)
		}
		u := stopEngine(p, syscall.SIGTERM, time.Minute)
		if u.ExitErr != nil {
			return fmt.Errorf("the %s engine did not stop cleanly: %w; last log lines:\n%s", spec.name, u.ExitErr, p.LogTail(logTailLines))
		}
		res.fill(pr, u, int64(b.gen.recordBytes(0)))
		return nil
	})
	if err == nil {
		b.logf("  %s: %s, %.2f CPU s per million records, peak RSS %s", spec.name, fmtRate(res.Rate), res.CPUPerMillion, fmtBytes(res.MaxRSS))
	}
	return res, err
}

// throttled runs the engine against a target that accepts only --throttle bytes per
// second, for --throttle-duration, and records how many records it held in flight and
// its peak RSS: with a slow target, memory must be bounded by maxInFlightPerPartition.
func (b *bench) throttled(ctx context.Context, maxInFlight int) (throttleResult, error) {
	res := throttleResult{MaxInFlightPerPartition: maxInFlight, Partitions: b.o.partitions,
		BytesPerSecond: b.o.throttle, Duration: b.o.throttleTime}
	spec := engineSpec{name: "throttled", noDataLoss: true, maxInFlight: maxInFlight, streams: b.o.streams}
	err := b.withTarget(ctx, spec.name, b.o.throttle, dataTopic, func(target []string) error {
		p, addr, err := b.launch(b.engineBin, spec, fmt.Sprintf("throttled-%d", maxInFlight), dataTopic, target)
		if err != nil {
			return err
		}
		end := time.After(b.o.throttleTime)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
	sample:
		for {
			select {
			case <-ctx.Done():
				stopEngine(p, syscall.SIGKILL, 5*time.Second)
				return ctx.Err()
			case <-p.Done():
				return p.ExitedError()
			case <-end:
				break sample
			case <-tick.C:
				fams, err := scrape(ctx, addr)
				if err != nil {
					continue
				}
				res.MaxInFlight = max(res.MaxInFlight, int64(fams.Sum("kafka_mirror_inflight_records")))
				res.Records = int64(fams.Sum("kafka_mirror_records_total"))
			}
		}
		// A drain against the throttled target would only cost time: kill it.
		u := stopEngine(p, syscall.SIGKILL, 5*time.Second)
		res.MaxRSS, res.CPU = u.MaxRSS, u.CPU
		return nil
	})
	if err == nil {
		b.logf("  throttled target, maxInFlightPerPartition %d: %d records in flight at most (bound %d), %.0f records/s, peak RSS %s",
			maxInFlight, res.MaxInFlight, res.bound(), res.rate(), fmtBytes(res.MaxRSS))
	}
	return res, err
}

func (b *bench) logf(format string, args ...any) {
	fmt.Printf("[%4.0fs] %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
