package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the benchmark's flags.
type options struct {
	records        int
	valueSize      int
	partitions     int
	brokers        int
	rounds         int
	groupsRounds   int
	bigRecords     int
	latencyRate    int
	latencyTime    time.Duration
	throttle       int64
	throttleTime   time.Duration
	throttleLimits []int
	largeRecords   int
	largeValueSize int
	largeInFlight  int64
	streams        int
	maxInFlight    int
	// engineMaxInFlightRequests is producer.maxInFlightRequests of the across-regions
	// engine arm (not the baseline's, whose binary may not know it); 0: the default.
	engineMaxInFlightRequests int
	// producerMaxInFlightRequests and baselineMaxInFlightRequests are
	// producer.maxInFlightRequests of the engine and baseline arms of the --baseline-bin
	// comparison (0: the binary's default), so one binary can be compared with itself at
	// two settings.
	producerMaxInFlightRequests int
	baselineMaxInFlightRequests int
	out                         string
	engineBin                   string
	baselineBin                 string
	engineEnv                   []string
	profile                     bool
	profileFilter               bool
	quick                       bool
	skipEngine                  bool
	keepLogs                    bool
	exactlyOnce                 bool
	// kafka is "kfake" (the default) or "real": the MirrorMaker 2 comparison on Apache
	// Kafka brokers (realkafka.go) instead of the kfake benchmark.
	kafka    string
	realKill bool
	// realKillEOS adds the exactly-once arms to the kill -9 test.
	realKillEOS bool
	mm2Heap     string
	// realArms are the mirrors of the throughput rounds (--real-arms), in the order of
	// the first round; realBrokers the brokers per cluster (--real-brokers, 1 or 3).
	realArms    []string
	realBrokers int
	// mm2Props are added to (or override) MirrorMaker 2's mm2.properties.
	mm2Props map[string]string
	// The across-regions section (distance.go).
	distance          bool
	latencyOnly       bool
	distanceRecords   int
	distanceValueSize int
	distanceRounds    int
	distanceRTTs      []time.Duration
	distanceBrokers   []int
	// distanceArms lists the arms of the across-regions section to run (all when empty).
	distanceArms []string
	// distanceSource adds the layout with the source far away and the target near.
	distanceSource bool
	// distanceTarget runs the layouts with the target far away (false: only the
	// source-far layouts, one per target broker count).
	distanceTarget bool
	// distanceTopicConfigs are configs of the across-regions target topic.
	distanceTopicConfigs map[string]*string
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.records, "records", 1_000_000, "records preloaded into the source topic and mirrored by each throughput run")
	fs.IntVar(&o.valueSize, "value-size", 200, "value size of each record in bytes")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the source topic")
	fs.IntVar(&o.brokers, "brokers", 3, "brokers per kfake cluster")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of the alternated throughput measurements (limit, engine, engine without no-data-loss, engine with a CEL filter)")
	fs.IntVar(&o.groupsRounds, "groups-rounds", 5, "rounds of the offset translation cost (plain, offset syncs, offset syncs + checkpoints; 0 skips it)")
	fs.IntVar(&o.bigRecords, "big-records", 5_000_000, "records of the larger memory run (0 skips it); the topic is topped up to this count")
	fs.IntVar(&o.latencyRate, "latency-rate", 2000, "records per second of the latency measurement")
	fs.DurationVar(&o.latencyTime, "latency-duration", 20*time.Second, "duration of the latency measurement (0 skips it)")
	fs.Int64Var(&o.throttle, "throttle", 2_000_000, "bytes per second the throttled target accepts")
	fs.DurationVar(&o.throttleTime, "throttle-duration", 15*time.Second, "duration of each throttled-target run (0 skips them)")
	inflight := fs.String("throttle-inflight", "10000,1000", "maxInFlightPerPartition of the throttled-target runs, comma-separated")
	fs.IntVar(&o.largeRecords, "large-records", 1000, "records of the large-record run against the throttled target (0 skips it)")
	fs.IntVar(&o.largeValueSize, "large-value-size", 100<<10, "value size of the large-record run in bytes")
	fs.Int64Var(&o.largeInFlight, "large-inflight-bytes", 32<<20, "the engine's maxInFlightBytes in the large-record run")
	fs.IntVar(&o.streams, "streams", 0, "the engine's streams (0: the config default)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 0, "the engine's maxInFlightPerPartition outside the throttled runs (0: the config default)")
	fs.StringVar(&o.out, "out", "", "directory for results.json and results.md (default docs/benchmarks, or a temporary directory with --quick)")
	fs.StringVar(&o.baselineBin, "baseline-bin", "", "compare the engine with this kafka-mirror binary and the bare forwarder, round by round, and print the ratios (writes no results)")
	env := fs.String("engine-env", "", "environment variables added to every engine process, comma-separated (for example GOGC=200,GOMEMLIMIT=150MiB)")
	fs.StringVar(&o.engineBin, "engine-bin", "", "a built kafka-mirror binary to run (default: build one from this checkout)")
	fs.BoolVar(&o.profile, "profile", false, "also run the engine once with CPU, allocation, heap and mutex profiling, into docs/benchmarks/engine-*.prof")
	fs.BoolVar(&o.profileFilter, "profile-filter", false, "profile the engine with the CEL filter rather than without handlers")
	fs.BoolVar(&o.quick, "quick", false, "a small run of about a minute, for trying the benchmark out: 100k records, one round, short latency and throttle runs")
	fs.BoolVar(&o.skipEngine, "skip-engine", false, "measure only the broker-bound limit")
	fs.BoolVar(&o.exactlyOnce, "exactly-once", true, "also measure the engine with delivery exactlyOnce against at-least-once, and its latency read_committed")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep the engine configs and logs (they are kept anyway when a run fails)")
	fs.BoolVar(&o.distance, "across-regions", true, "also run the across-regions section: a target (and a source) behind toxiproxy latency, the engine against the sarama and franz-go forwarders")
	fs.BoolVar(&o.latencyOnly, "latency-only", false, "run only the across-regions section (with --baseline-bin, the baseline engine is a fourth arm)")
	fs.IntVar(&o.distanceRecords, "distance-records", 200_000, "records of each across-regions run")
	fs.IntVar(&o.distanceValueSize, "distance-value-size", 1024, "value size of the across-regions records in bytes")
	fs.IntVar(&o.distanceRounds, "distance-rounds", 1, "rounds of each across-regions layout")
	rtts := fs.String("distance-rtts", "0,20ms,100ms", "round trips added in front of the target, comma-separated; the last one is also put in front of the source")
	dbrokers := fs.String("distance-brokers", "1,3", "target broker counts of the across-regions section, comma-separated")
	darms := fs.String("distance-arms", "", "arms of the across-regions section to run, comma-separated: engine, baseline, sarama, franz-go (default: all; baseline only with --baseline-bin)")
	dconfigs := fs.String("distance-target-configs", "", "configs of the across-regions target topic, comma-separated KEY=VALUE (for example max.message.bytes=4194304: the engine sizes its batches by it)")
	fs.IntVar(&o.engineMaxInFlightRequests, "distance-engine-max-in-flight-requests", 0, "producer.maxInFlightRequests of the across-regions engine arm (1-5; above 1 the engine's pipelined producer); 0: the engine's default")
	fs.IntVar(&o.producerMaxInFlightRequests, "producer-max-in-flight-requests", 0, "with --baseline-bin, producer.maxInFlightRequests of the engine arm (1-5); 0: the engine's default")
	fs.IntVar(&o.baselineMaxInFlightRequests, "baseline-producer-max-in-flight-requests", 0, "with --baseline-bin, producer.maxInFlightRequests of the baseline arm (1-5; pass the same binary as --engine-bin to compare two settings); 0: the binary's default")
	fs.BoolVar(&o.distanceSource, "distance-source", true, "also run the across-regions layout with the source as far away as the last --distance-rtts and the target near")
	fs.BoolVar(&o.distanceTarget, "distance-target", true, "run the across-regions layouts with the target far away; false leaves only the source-far layout, then one per --distance-brokers")
	fs.StringVar(&o.kafka, "kafka", "kfake", "the brokers: kfake (in-process, the default), or real: two single-broker Apache Kafka clusters (make kafka) with the engine, the bare forwarder and MirrorMaker 2 (make kafka-mm2) in alternating rounds, into docs/benchmarks/mm2-results.*; then --records defaults to 200000, --value-size to 1024 and --rounds to 3")
	fs.StringVar(&o.mm2Heap, "mm2-heap", defaultMM2Heap, "with --kafka real, MirrorMaker 2's JVM -Xmx")
	mm2Props := fs.String("mm2-props", "", "with --kafka real, properties added to MirrorMaker 2's mm2.properties, comma-separated KEY=VALUE (for example target.producer.batch.size=1048576,target.producer.linger.ms=5)")
	fs.BoolVar(&o.realKillEOS, "kill9-exactly-once", true, "with --kafka real and --kill9, also kill -9 the engine with delivery: exactlyOnce and MirrorMaker 2 with exactly.once.source.support=enabled, audited read_committed")
	arms := fs.String("real-arms", "kafka-mirror,forwarder,mm2", "with --kafka real, the mirrors of the throughput rounds, comma-separated: "+strings.Join(realArmFlagNames(), ", ")+" (the -eos arms: the engine with delivery: exactlyOnce, MirrorMaker 2 with exactly.once.source.support=enabled; their target is counted read_committed)")
	fs.IntVar(&o.realBrokers, "real-brokers", 1, "with --kafka real, brokers per cluster: 1, or 3 (every topic with replication factor 3, min.insync.replicas 2)")
	fs.BoolVar(&o.realKill, "kill9", true, "with --kafka real, also kill -9 the engine and MirrorMaker 2 mid-stream, restart them and count duplicates and losses")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch o.kafka {
	case "kfake":
	case "real":
		real := map[string]func(){
			"records":    func() { o.records = 200_000 },
			"value-size": func() { o.valueSize = 1024 },
			"rounds":     func() { o.rounds = 3 },
		}
		for name, apply := range real {
			if !set[name] {
				apply()
			}
		}
	default:
		return o, fmt.Errorf("--kafka: %q is neither kfake nor real", o.kafka)
	}
	if o.quick {
		quick := map[string]func(){
			"records":           func() { o.records = 100_000 },
			"big-records":       func() { o.bigRecords = 300_000 },
			"rounds":            func() { o.rounds = 1 },
			"groups-rounds":     func() { o.groupsRounds = 1 },
			"latency-rate":      func() { o.latencyRate = 1000 },
			"latency-duration":  func() { o.latencyTime = 5 * time.Second },
			"throttle-duration": func() { o.throttleTime = 6 * time.Second },
			"large-records":     func() { o.largeRecords = 300 },
			"distance-records":  func() { o.distanceRecords = 50_000 },
			"distance-rtts":     func() { *rtts = "0,100ms" },
			"distance-brokers":  func() { *dbrokers = "1" },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	for _, kv := range strings.Split(*env, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return o, fmt.Errorf("--engine-env: %q is not KEY=VALUE", kv)
		}
		o.engineEnv = append(o.engineEnv, kv)
	}
	for _, kv := range strings.Split(*mm2Props, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return o, fmt.Errorf("--mm2-props: %q is not KEY=VALUE", kv)
		}
		if o.mm2Props == nil {
			o.mm2Props = map[string]string{}
		}
		o.mm2Props[k] = strings.TrimSpace(v)
	}
	var err error
	if o.realArms, err = parseRealArms(*arms); err != nil {
		return o, err
	}
	if o.realBrokers != 1 && o.realBrokers != 3 {
		return o, fmt.Errorf("--real-brokers: %d is neither 1 nor 3", o.realBrokers)
	}
	if o.distanceBrokers, err = parseInts(*dbrokers); err != nil || len(o.distanceBrokers) == 0 {
		return o, fmt.Errorf("--distance-brokers: %q is not a list of positive numbers", *dbrokers)
	}
	if o.distanceRTTs, err = parseDurations(*rtts); err != nil {
		return o, fmt.Errorf("--distance-rtts: %w", err)
	}
	for _, kv := range strings.Split(*dconfigs, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return o, fmt.Errorf("--distance-target-configs: %q is not KEY=VALUE", kv)
		}
		if o.distanceTopicConfigs == nil {
			o.distanceTopicConfigs = map[string]*string{}
		}
		v = strings.TrimSpace(v)
		o.distanceTopicConfigs[k] = &v
	}
	for _, a := range strings.Split(*darms, ",") {
		switch a = strings.TrimSpace(a); a {
		case "":
		case "engine", "baseline", "sarama", "franz-go":
			o.distanceArms = append(o.distanceArms, a)
		default:
			return o, fmt.Errorf("--distance-arms: %q is none of engine, baseline, sarama, franz-go", a)
		}
	}
	if o.throttleLimits, err = parseInts(*inflight); err != nil {
		return o, fmt.Errorf("--throttle-inflight: %w", err)
	}
	switch {
	case o.distanceRecords <= 0 || o.distanceValueSize <= 0 || o.distanceRounds <= 0:
		return o, errors.New("--distance-records, --distance-value-size and --distance-rounds must be positive")
	case !o.distanceTarget && (!o.distanceSource || o.distanceRTTs[len(o.distanceRTTs)-1] <= 0):
		return o, errors.New("--distance-target=false needs --distance-source and a last --distance-rtts above 0: no layout is left")
	case o.producerMaxInFlightRequests < 0 || o.producerMaxInFlightRequests > 5:
		return o, errors.New("--producer-max-in-flight-requests must be 0 (the default) or 1 to 5")
	case o.baselineMaxInFlightRequests < 0 || o.baselineMaxInFlightRequests > 5:
		return o, errors.New("--baseline-producer-max-in-flight-requests must be 0 (the default) or 1 to 5")
	case o.records <= 0:
		return o, errors.New("--records must be positive")
	case o.valueSize <= 0:
		return o, errors.New("--value-size must be positive")
	case o.partitions <= 0 || o.partitions > 10_000:
		return o, errors.New("--partitions must be between 1 and 10000")
	case o.brokers <= 0:
		return o, errors.New("--brokers must be positive")
	case o.rounds <= 0:
		return o, errors.New("--rounds must be positive")
	case o.groupsRounds < 0:
		return o, errors.New("--groups-rounds must not be negative")
	case o.bigRecords != 0 && o.bigRecords <= o.records:
		return o, errors.New("--big-records must be 0 or more than --records")
	case o.latencyTime > 0 && o.latencyRate <= 0:
		return o, errors.New("--latency-rate must be positive")
	case o.throttleTime > 0 && o.throttle <= 0:
		return o, errors.New("--throttle must be positive")
	case o.largeRecords < 0 || o.largeValueSize <= 0 || o.largeInFlight <= 0:
		return o, errors.New("--large-records must not be negative, --large-value-size and --large-inflight-bytes must be positive")
	}
	if o.out == "" {
		o.out = filepath.Join("docs", "benchmarks")
		if o.quick {
			o.out = filepath.Join(os.TempDir(), "kafka-mirror-bench")
		}
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 {
		// The benchmark re-runs itself as the child processes it measures.
		child := map[string]func([]string) error{profiledEngineCommand: runProfiledEngine, limitCommand: runLimit, forwarderCommand: runForwarder, kgoForwarderCommand: runKgoForwarder}[os.Args[1]]
		if child != nil {
			if err := child(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "Error:", err)
				os.Exit(1)
			}
			return
		}
	}
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// parseDurations parses a comma-separated list of durations ("0" is allowed).
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q is not a duration", f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no round trip given")
	}
	return out, nil
}
