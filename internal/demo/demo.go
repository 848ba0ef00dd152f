package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"golang.org/x/sync/errgroup"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Defaults of the demo; with them it takes about half a minute on 2 cores.
const (
	// DefaultRecords is the number of records produced when Options.Records is 0.
	DefaultRecords = 30000
	// DefaultRate is the CLI's --rate: steady enough for the progress view to show a
	// mirror keeping up, and to leave a few seconds between the demo's events.
	DefaultRate = 1500
	// DefaultInterval is the time between progress frames when Options.Interval is 0.
	DefaultInterval = time.Second
)

// Options tune the demo. The zero value plus an Engine runs the default scenario.
type Options struct {
	// Records is the number of records produced. Default DefaultRecords.
	Records int
	// Rate is records per second over all partitions; 0 means as fast as possible (the
	// CLI passes DefaultRate unless told otherwise).
	Rate int
	// KeepRunning leaves both clusters up after the report, prints their addresses and
	// waits for ctx to end, so a user can point kcat or their own client at them.
	KeepRunning bool
	// Engine runs the kafka-mirror binary; required.
	Engine EngineCommand
	// Out receives the story, the progress view and the report. Default os.Stdout.
	Out io.Writer
	// TTY redraws the progress view in place; otherwise one plain line per Interval.
	TTY bool
	// Width is the terminal's width in columns when TTY is set; 0 means unknown.
	Width int
	// Interval is the time between progress frames. Default DefaultInterval.
	Interval time.Duration
	// WorkDir holds the rendered mirror.yaml and the engine's log. Default a new
	// temporary directory, left in place so that the log can be read afterwards.
	WorkDir string
	// ExactlyOnce runs the engine with delivery exactlyOnce and audits the target as a
	// read_committed consumer: then a duplicate breaks the promise too.
	ExactlyOnce bool
	// RealKafka plays the scenes on two single-broker Apache Kafka clusters (JVMs from
	// the jars `make kafka` fetched into the cache) instead of embedded kfake clusters.
	RealKafka bool
}

// The demo's topics: different partition counts, one topic expanded mid-run, one
// excluded by the topic selection.
const (
	topicEU       = "orders.eu"
	topicUS       = "orders.us"
	topicPayments = "payments"
	topicScratch  = "orders.tmp.scratch"
	consumerGroup = "kafka-mirror.demo"
	// celFilter drops the records the workload marks with the skip header.
	celFilter = "!('" + audit.HeaderSkip + "' in record.headers)"
)

var (
	initialPartitions = map[string]int32{topicEU: 6, topicUS: 3, topicPayments: 4}
	expandedTopic     = topicUS
	expandedTo        = int32(5)
)

// Result is what the demo found.
type Result struct {
	// Audit compares every record the source acknowledged with the target.
	Audit audit.Report
	// Topics holds both clusters' view of each mirrored topic at the end.
	Topics []TopicResult
	// ExcludedOnTarget is true if the excluded topic wrongly appeared on the target.
	ExcludedOnTarget bool
	// ExpectedFiltered counts the produced records carrying the skip header.
	ExpectedFiltered int
	// Kills is the number of times the engine was killed with SIGKILL.
	Kills int
	// Elapsed is the demo's wall time up to the report.
	Elapsed time.Duration
	// Failover is what the failover scene found (nil when it did not run).
	Failover *FailoverResult
	// ExactlyOnce is set when the engine ran with delivery exactlyOnce and the target
	// was read read_committed.
	ExactlyOnce bool
}

// TopicResult is one mirrored topic's partition counts at the end.
type TopicResult struct {
	// Source is the topic's name (the same on the target: the demo does not rename).
	Source string
	// SourcePartitions is the source topic's partition count.
	SourcePartitions int
	// TargetPartitions is the target topic's partition count (0 if it does not exist).
	TargetPartitions int
}

// Err says what promise was broken, or nil: nothing lost, the filter dropped exactly
// the marked records and nothing else, order and partitions kept, records unaltered,
// partition counts in sync, the excluded topic left alone. Duplicates are allowed at
// least once (after a kill -9 the records acked by the target but not yet committed are
// mirrored again), not with ExactlyOnce.
func (r *Result) Err() error {
	var problems []string
	t := r.Audit.Total
	if t.Lost > 0 {
		problems = append(problems, fmt.Sprintf("%d records lost (first: %s)", t.Lost, strings.Join(r.Audit.FirstMissing, ", ")))
	}
	if t.Filtered != r.ExpectedFiltered || t.Leaked > 0 {
		problems = append(problems, fmt.Sprintf("filter dropped %d records, expected %d (%d leaked through)", t.Filtered, r.ExpectedFiltered, t.Leaked))
	}
	if t.OutOfOrder > 0 {
		problems = append(problems, fmt.Sprintf("%d records out of order", t.OutOfOrder))
	}
	if r.ExactlyOnce && t.Duplicated > 0 {
		problems = append(problems, fmt.Sprintf("%d duplicates seen by a read_committed reader with delivery exactlyOnce", t.Duplicated))
	}
	if t.WrongPartition > 0 {
		problems = append(problems, fmt.Sprintf("%d records in the wrong partition", t.WrongPartition))
	}
	if t.Altered > 0 {
		problems = append(problems, fmt.Sprintf("%d records altered", t.Altered))
	}
	for _, tr := range r.Topics {
		if tr.SourcePartitions != tr.TargetPartitions {
			problems = append(problems, fmt.Sprintf("topic %s has %d partitions on the source and %d on the target", tr.Source, tr.SourcePartitions, tr.TargetPartitions))
		}
	}
	if r.ExcludedOnTarget {
		problems = append(problems, fmt.Sprintf("excluded topic %s was created on the target", topicScratch))
	}
	if f := r.Failover; f != nil && f.Skipped > 0 {
		problems = append(problems, fmt.Sprintf("group %s skipped %d records when it moved to the target", appGroup, f.Skipped))
	}
	if f := r.Failover; f != nil && r.ExactlyOnce && f.Copies > 0 {
		problems = append(problems, fmt.Sprintf("group %s read %d extra copies on the target with delivery exactlyOnce", appGroup, f.Copies))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the mirror broke its promise: %s", strings.Join(problems, "; "))
}

// Run plays the whole scenario and returns what it found. The error is about the demo
// itself (a cluster that would not start, an engine that crashed, ctx ended); whether
// the mirror kept its promise is Result.Err.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	d := &demo{opts: opts, start: time.Now(), http: &http.Client{}, result: &Result{ExactlyOnce: opts.ExactlyOnce}, failed: make(chan error, 1)}
	d.view = newView(opts.Out, opts.TTY, opts.Width, d.start)
	defer d.close()

	steps := []func(context.Context) error{
		d.startClusters,
		d.createSourceTopics,
		d.syncTopics,
		d.writeConfig,
		d.startEngine,
		d.mirrorWhileFaultsHappen,
		d.waitUntilCaughtUp,
		d.appReadsAndMirrorTranslates,
		d.stopEngine,
		d.verify,
		d.appMovesToTarget,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return d.result, d.explain(err)
		}
	}
	// Stamped here, not in verify: the scenes after it print events of their own, and the
	// report must not read earlier than the last of them.
	d.result.Elapsed = time.Since(d.start)
	d.printReport()
	if opts.KeepRunning {
		d.keepRunning(ctx)
	}
	d.passed = true
	return d.result, nil
}

func (o *Options) defaults() error {
	if o.Engine == nil {
		return errors.New("demo: Options.Engine is required")
	}
	if o.Records == 0 {
		o.Records = DefaultRecords
	}
	if o.Records < 0 || o.Rate < 0 {
		return fmt.Errorf("demo: records (%d) and rate (%d) must not be negative", o.Records, o.Rate)
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return nil
}

// demo is the state of one run of the scenario.
type demo struct {
	opts  Options
	start time.Time
	view  *view
	http  *http.Client

	clusters    *clusters
	srcBrokers  []string
	dstBrokers  []string
	srcAdmin    sarama.ClusterAdmin
	dstAdmin    sarama.ClusterAdmin
	observer    *observer
	configPath  string
	logPath     string
	tempDir     string // the work directory the demo created (none with Options.WorkDir)
	passed      bool   // Run finished every step: the temporary work directory goes
	log         *os.File
	metricsAddr string

	mu          sync.Mutex
	restartedAt time.Time // set by a restart until the new engine mirrors its first record
	engine      *engineproc.Process
	expected    bool // the current engine's exit is expected (killed or stopped on purpose)
	failed      chan error
	states      []topicState
	metrics     engineMetrics

	produced *audit.Produced
	result   *Result
}

func (d *demo) startClusters(ctx context.Context) error {
	var c *clusters
	var err error
	if d.opts.RealKafka {
		d.view.event("Starting two Apache Kafka clusters (a JVM each: 10-30 s)...")
		c, err = startRealClusters(ctx)
	} else {
		c, err = startClusters(1)
	}
	if err != nil {
		return err
	}
	d.clusters = c
	d.srcBrokers = c.source
	d.dstBrokers = c.target
	d.view.event("Started the source cluster on %s and the target cluster on %s (%s).",
		strings.Join(d.srcBrokers, ","), strings.Join(d.dstBrokers, ","), c.kind)
	src := config.Cluster{BootstrapServers: d.srcBrokers, ClientID: "kafka-mirror-demo"}
	dst := config.Cluster{BootstrapServers: d.dstBrokers, ClientID: "kafka-mirror-demo"}
	if d.srcAdmin, err = kafka.NewClusterAdmin(src, kafka.WithRole(kafka.RoleSource)); err != nil {
		return err
	}
	if d.dstAdmin, err = kafka.NewClusterAdmin(dst, kafka.WithRole(kafka.RoleTarget)); err != nil {
		return err
	}
	srcClient, err := kafka.NewClient(src, kafka.WithRole(kafka.RoleSource))
	if err != nil {
		return err
	}
	dstClient, err := kafka.NewClient(dst, kafka.WithRole(kafka.RoleTarget))
	if err != nil {
		srcClient.Close()
		return err
	}
	d.observer = &observer{source: srcClient, target: dstClient, sourceAdmin: d.srcAdmin, group: consumerGroup}
	for _, t := range []string{topicEU, topicUS, topicPayments} {
		d.observer.topics = append(d.observer.topics, topicPair{Source: t, Target: t})
	}
	return nil
}

func (d *demo) createSourceTopics(context.Context) error {
	all := map[string]int32{topicScratch: 2}
	for t, n := range initialPartitions {
		all[t] = n
	}
	var names []string
	for _, t := range []string{topicEU, topicUS, topicPayments, topicScratch} {
		if err := d.srcAdmin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: all[t], ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("while creating source topic %q: %w", t, err)
		}
		names = append(names, fmt.Sprintf("%s (%d partitions)", t, all[t]))
	}
	d.view.event("Created source topics %s.", strings.Join(names, ", "))
	return nil
}

// mirrorConfig is the standalone config the engine runs with: the same file a user
// writes for `kafka-mirror run`, with short intervals so that the demo shows commits and
// topic sync within seconds.
func (d *demo) mirrorConfig() *config.Config {
	cfg := &config.Config{
		Source:        config.Cluster{BootstrapServers: d.srcBrokers},
		Target:        config.Cluster{BootstrapServers: d.dstBrokers},
		ConsumerGroup: consumerGroup,
		Topics: config.Topics{
			Include: []string{`orders\..*`, topicPayments},
			Exclude: []string{`orders\.tmp\..*`},
		},
		OffsetCommitInterval: config.Duration{Duration: time.Second},
		TopicSyncInterval:    config.Duration{Duration: 2 * time.Second},
		Handlers:             []config.HandlerSpec{{CEL: &config.CELHandler{Filter: celFilter}}},
		Metrics:              config.Metrics{Address: d.metricsAddr},
		Groups:               &config.Groups{Include: []string{appGroup}, SyncInterval: config.Duration{Duration: groupSyncInterval}},
		// A static member: the engine restarted after the kill takes its old place in
		// the group at once.
		Consumer: &config.Consumer{GroupInstanceID: "demo-engine"},
	}
	if d.opts.ExactlyOnce {
		cfg.Delivery = config.DeliveryExactlyOnce
	}
	cfg.Default()
	return cfg
}

func (d *demo) syncTopics(ctx context.Context) error {
	cfg := d.mirrorConfig()
	sel, err := topics.NewSelector(cfg.Topics)
	if err != nil {
		return err
	}
	rep, err := topics.NewSyncer(d.srcAdmin, d.dstAdmin, sel, topics.SyncOptions{}).Sync(ctx)
	if err != nil {
		return fmt.Errorf("while syncing topics: %w", err)
	}
	var b strings.Builder
	b.WriteString("          Topic sync (the same code the operator runs as a reconcile step):\n")
	for _, t := range rep.Topics {
		fmt.Fprintf(&b, "            %-20s -> %-20s %d -> %d partitions  %s\n", t.Source, t.Target, t.SourcePartitions, t.TargetPartitions, t.Action)
		if t.Err != nil {
			return fmt.Errorf("while syncing topic %q: %w", t.Source, t.Err)
		}
	}
	fmt.Fprintf(&b, "            %-20s    excluded by topics.exclude, not created on the target\n", topicScratch)
	d.view.event("Synced topics: %d created on the target with the source's partition counts.", rep.Created)
	d.view.text(b.String())
	return nil
}

func (d *demo) writeConfig(context.Context) error {
	dir := d.opts.WorkDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "kafka-mirror-demo-"); err != nil {
			return fmt.Errorf("while creating the demo's work directory: %w", err)
		}
		d.tempDir = dir
	}
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		return err
	}
	d.metricsAddr = addr
	cfg := d.mirrorConfig()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("while validating the demo's mirror config: %w", err)
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("while rendering the demo's mirror config: %w", err)
	}
	d.configPath = filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(d.configPath, data, 0o600); err != nil {
		return fmt.Errorf("while writing the demo's mirror config: %w", err)
	}
	d.logPath = filepath.Join(dir, "engine.log")
	if d.log, err = os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return fmt.Errorf("while creating the engine log: %w", err)
	}
	if cfg.ExactlyOnce() {
		d.view.event("Wrote the engine's config to %s (filter: %s; delivery exactlyOnce: records and source offsets in one target transaction per source partition every %s).",
			d.configPath, celFilter, cfg.TransactionInterval.Duration)
		return nil
	}
	d.view.event("Wrote the engine's config to %s (filter: %s; commit every %s).", d.configPath, celFilter, cfg.OffsetCommitInterval.Duration)
	return nil
}

func (d *demo) startEngine(context.Context) error {
	p, err := startEngine(d.opts.Engine, d.configPath, &logTap{file: d.log, tell: func(l string) { d.view.event("%s", l) }})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.engine, d.expected = p, false
	d.mu.Unlock()
	go d.watchEngine(p)
	d.view.event("Started the engine: kafka-mirror run --config %s (pid %d, log %s, metrics http://%s/metrics).",
		filepath.Base(d.configPath), p.Pid(), d.logPath, d.metricsAddr)
	return nil
}

// watchEngine reports an engine that exits when nobody asked it to.
func (d *demo) watchEngine(p *engineproc.Process) {
	<-p.Done()
	d.mu.Lock()
	expected := d.expected || d.engine != p
	d.mu.Unlock()
	if expected {
		return
	}
	select {
	case d.failed <- fmt.Errorf("the engine (pid %d) exited on its own: %v", p.Pid(), p.Err()):
	default:
	}
}

// mirrorWhileFaultsHappen produces the workload in two phases around a source partition
// expansion, and kills and restarts the engine part-way through the second phase, while
// the progress view runs.
func (d *demo) mirrorWhileFaultsHappen(ctx context.Context) error {
	return d.whileWatching(ctx, d.script)
}

// whileWatching runs step with the progress view running beside it; the view stops
// when step returns, and an engine that dies on its own fails the step.
func (d *demo) whileWatching(ctx context.Context, step func(context.Context) error) error {
	stepDone, endWatch := context.WithCancel(ctx)
	defer endWatch()
	g, gctx := errgroup.WithContext(stepDone)
	g.Go(func() error { return d.watch(gctx) })
	g.Go(func() error {
		defer endWatch()
		return step(gctx)
	})
	err := g.Wait()
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() == nil {
		// The step finished and ended the view; that is not a failure.
		err = nil
	}
	return err
}

func (d *demo) script(ctx context.Context) error {
	total := d.opts.Records
	first := total * 3 / 10
	phaseRate := d.opts.Rate
	// The workload is written in two phases around the expansion: a phase writes to the
	// partitions that exist when it starts.
	produced := &audit.Produced{}
	if first > 0 {
		p, err := audit.Produce(ctx, d.srcBrokers, audit.Workload{
			Topics: initialPartitions, Records: first, Rate: phaseRate, SkipFraction: 0.1, NullFraction: 0.02, Seed: 1, Run: "a",
		}, nil)
		if err != nil {
			return fmt.Errorf("while producing the workload: %w", err)
		}
		produced.Merge(p)
	}
	if err := d.srcAdmin.CreatePartitions(expandedTopic, expandedTo, nil, false); err != nil {
		return fmt.Errorf("while expanding source topic %q: %w", expandedTopic, err)
	}
	expandedAt := time.Now()
	d.view.event("Expanded source topic %s from %d to %d partitions; the engine's topic sync should follow on the target.",
		expandedTopic, initialPartitions[expandedTopic], expandedTo)

	second := map[string]int32{}
	for t, n := range initialPartitions {
		second[t] = n
	}
	second[expandedTopic] = expandedTo
	phase2 := make(chan *audit.Produced, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		p, err := audit.Produce(gctx, d.srcBrokers, audit.Workload{
			Topics: second, Records: total - first, Rate: phaseRate, SkipFraction: 0.1, NullFraction: 0.02, Seed: 2, Run: "b",
		}, nil)
		phase2 <- p
		if err != nil {
			return fmt.Errorf("while producing the workload: %w", err)
		}
		return nil
	})
	g.Go(func() error { return d.killAndRestart(gctx, int64(total)*55/100) })
	g.Go(func() error { return d.waitUntilTargetFollows(gctx, expandedAt) })
	if err := g.Wait(); err != nil {
		return err
	}
	produced.Merge(<-phase2)
	if produced.Failed > 0 {
		return fmt.Errorf("the source refused %d workload records: %w", produced.Failed, produced.FirstError)
	}
	d.produced = produced
	d.view.event("Produced %s records (keys, headers, %d%% marked skip, a few tombstones); all acknowledged by the source.",
		count(int64(len(produced.Records))), 10)
	return nil
}

// killAndRestart waits until the source holds killAt records and the engine has
// committed at least once, kills the engine with SIGKILL and restarts it. A kill before
// the first commit would show a restart from the beginning, not from a commit point.
func (d *demo) killAndRestart(ctx context.Context, killAt int64) error {
	if err := d.waitFor(ctx, "the workload to reach the kill point", 2*time.Minute, func(s []topicState, _ engineMetrics) bool {
		var committed int64
		for _, t := range s {
			committed += t.Committed
		}
		return sourceTotal(s) >= killAt && committed > 0
	}); err != nil {
		return err
	}
	d.mu.Lock()
	p := d.engine
	d.expected = true
	inflight := d.metrics.InFlight
	d.mu.Unlock()
	if err := p.Kill(); err != nil {
		return err
	}
	d.result.Kills++
	if d.opts.ExactlyOnce {
		d.view.event("Killed the engine with SIGKILL (pid %d): no drain, no final commit, its open transactions left open on the target.", p.Pid())
	} else {
		d.view.event("Killed the engine with SIGKILL (pid %d): no drain, no final commit, ~%.0f records in flight dropped from its memory.", p.Pid(), inflight)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Second):
	}
	if err := d.startEngine(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	d.restartedAt = time.Now()
	d.mu.Unlock()
	if d.opts.ExactlyOnce {
		d.view.event("Restarted the engine: opening each partition's transactional id fences the killed engine and aborts its open transactions; it resumes from the source offsets committed in the last target transactions.")
		return nil
	}
	d.view.event("Restarted the engine: it resumes from the last committed offsets; records acked but not committed before the kill are mirrored again.")
	return nil
}

// waitUntilTargetFollows waits for the engine's topic sync to expand the target topic
// as the source grew; the script is not done before it has.
func (d *demo) waitUntilTargetFollows(ctx context.Context, since time.Time) error {
	err := d.waitFor(ctx, "the target to follow the source's partition expansion", time.Minute, func(s []topicState, _ engineMetrics) bool {
		for _, t := range s {
			if t.Source == expandedTopic {
				return t.TargetPartitions == int(expandedTo)
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	d.view.event("Target topic %s followed: %d partitions, seen %.1fs after the source grew.", expandedTopic, expandedTo, time.Since(since).Seconds())
	return nil
}

// watch refreshes the topic states and the engine's metrics every interval and draws a
// progress frame.
func (d *demo) watch(ctx context.Context) error {
	t := time.NewTicker(d.opts.Interval)
	defer t.Stop()
	var last engineMetrics
	var lastAt time.Time
	failures := 0
	for {
		states, err := d.observer.snapshot()
		if err != nil {
			// A metadata refresh can fail for a moment (a partition just created has
			// no leader yet); only a cluster that stays unreadable ends the demo.
			if failures++; failures > 10 && ctx.Err() == nil {
				return err
			}
			d.mu.Lock()
			states = d.states
			d.mu.Unlock()
		} else {
			failures = 0
		}
		d.mu.Lock()
		p, expected := d.engine, d.expected
		d.mu.Unlock()
		engine, pid := "stopped", 0
		var m engineMetrics
		var rate, byteRate float64
		if p != nil && !expected {
			engine, pid = "running", p.Pid()
			if got, err := scrapeMetrics(ctx, d.http, d.metricsAddr); err == nil {
				m = got
				now := time.Now()
				if !lastAt.IsZero() && m.Records >= last.Records {
					secs := now.Sub(lastAt).Seconds()
					rate, byteRate = (m.Records-last.Records)/secs, (m.Bytes-last.Bytes)/secs
				}
				last, lastAt = m, now
			} else {
				// The metrics endpoint answers once the engine has connected.
				engine = "starting"
				lastAt = time.Time{}
			}
		} else if expected && p != nil {
			engine = "killed"
			lastAt = time.Time{}
		}
		d.mu.Lock()
		d.states, d.metrics = states, m
		restartedAt := d.restartedAt
		resumed := !restartedAt.IsZero() && m.Records > 0
		if resumed {
			d.restartedAt = time.Time{}
		}
		d.mu.Unlock()
		if resumed {
			d.view.event("The restarted engine is mirroring again, %.1fs after its start: it rejoined the group under its static instance ID (consumer.groupInstanceId), so it got its partitions back without waiting for the killed member's session to time out.",
				time.Since(restartedAt).Seconds())
		}
		d.view.show(progress{
			Elapsed: time.Since(d.start), Produced: sourceTotal(states), ToProduce: int64(d.opts.Records),
			Engine: engine, PID: pid, RecordsPerSec: rate, BytesPerSec: byteRate, InFlight: m.InFlight,
			Commits: m.Commits, Filtered: m.Filtered, Topics: states,
		})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-d.failed:
			return err
		case <-t.C:
		}
	}
}

// waitFor polls the latest observation until cond holds.
func (d *demo) waitFor(ctx context.Context, what string, timeout time.Duration, cond func([]topicState, engineMetrics) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		states, m := d.states, d.metrics
		d.mu.Unlock()
		if states != nil && cond(states, m) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func sourceTotal(states []topicState) int64 {
	var n int64
	for _, s := range states {
		n += s.SourceEnd
	}
	return n
}

// waitUntilCaughtUp keeps the progress view running until the group has committed
// everything the source holds.
func (d *demo) waitUntilCaughtUp(ctx context.Context) error {
	err := d.whileWatching(ctx, func(ctx context.Context) error {
		return d.waitFor(ctx, "the engine to commit every source record", 90*time.Second, func(s []topicState, _ engineMetrics) bool {
			return caughtUp(s)
		})
	})
	if err != nil {
		return err
	}
	d.view.done()
	d.view.event("The engine caught up: every source offset committed, lag 0 on every partition.")
	return nil
}

func (d *demo) stopEngine(context.Context) error {
	d.mu.Lock()
	p := d.engine
	d.expected = true
	d.mu.Unlock()
	if err := p.Stop(30 * time.Second); err != nil {
		return err
	}
	d.view.event("Stopped the engine with SIGTERM (what Kubernetes sends a pod): it drained and committed, then exited 0.")
	return nil
}

func (d *demo) verify(ctx context.Context) error {
	d.view.event("Reading the target back with an independent client (franz-go) to audit it against every record the source acknowledged...")
	mirrored, err := audit.ReadAll(ctx, d.dstBrokers, d.produced.Topics(), audit.ReadOptions{Timeout: time.Minute, ReadCommitted: d.opts.ExactlyOnce})
	if err != nil {
		return fmt.Errorf("while reading the target back: %w", err)
	}
	r := d.result
	r.Audit = audit.Audit(d.produced, mirrored, audit.Options{Filtered: audit.SkipHeaderFiltered})
	for _, pr := range d.produced.Records {
		if pr.Skip {
			r.ExpectedFiltered++
		}
	}
	states, err := d.observer.snapshot()
	if err != nil {
		return err
	}
	for _, s := range states {
		r.Topics = append(r.Topics, TopicResult{Source: s.Source, SourcePartitions: s.SourcePartitions, TargetPartitions: s.TargetPartitions})
	}
	existing, err := d.dstAdmin.ListTopics()
	if err != nil {
		return fmt.Errorf("while listing target topics: %w", err)
	}
	_, r.ExcludedOnTarget = existing[topicScratch]
	return nil
}

func (d *demo) printReport() {
	r := d.result
	t := r.Audit.Total
	var b strings.Builder
	fmt.Fprintf(&b, "\nVerification report (%.1fs)\n", r.Elapsed.Seconds())
	line := func(name string, n int, note string) {
		fmt.Fprintf(&b, "  %-16s %10s  %s\n", name, count(int64(n)), note)
	}
	line("produced", t.Produced, "records the source acknowledged")
	line("mirrored", t.Mirrored, "distinct records on the target, same partition, unaltered")
	line("filtered", t.Filtered, fmt.Sprintf("dropped by the filter %s (%s carry the skip header)", celFilter, count(int64(r.ExpectedFiltered))))
	line("lost", t.Lost, "acknowledged by the source, kept by the filter, missing on the target")
	if r.ExactlyOnce {
		line("duplicated", t.Duplicated, fmt.Sprintf("extra copies after %d kill -9, read read_committed (delivery exactlyOnce)", r.Kills))
	} else {
		line("duplicated", t.Duplicated, fmt.Sprintf("extra copies after %d kill -9 (acked by the target, not yet committed)", r.Kills))
	}
	line("out of order", t.OutOfOrder, "per source partition")
	var parts []string
	for _, tr := range r.Topics {
		parts = append(parts, fmt.Sprintf("%s %d/%d", tr.Source, tr.SourcePartitions, tr.TargetPartitions))
	}
	fmt.Fprintf(&b, "  %-16s %10s  %s (source/target)\n", "partitions", inSync(r), strings.Join(parts, ", "))
	excluded := "not on the target"
	if r.ExcludedOnTarget {
		excluded = "WRONGLY created on the target"
	}
	fmt.Fprintf(&b, "  %-16s %10s  %s %s\n", "excluded topic", "", topicScratch, excluded)
	if f := r.Failover; f != nil {
		fmt.Fprintf(&b, "  %-16s %10s  group %s moved to the target: read %s of the %s records after its source position (%s skipped), %s read again from before it, %s extra copies\n",
			"failover", count(int64(f.Read)), appGroup, count(int64(f.Expected-f.Skipped)), count(int64(f.Expected)), count(int64(f.Skipped)),
			count(int64(f.Repeated)), count(int64(f.Copies)))
	}
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "\nFAILED: %v\n", err)
	} else if r.ExactlyOnce {
		b.WriteString("\nPASSED: nothing lost, nothing duplicated (read_committed, delivery exactlyOnce), the filter dropped exactly the marked records, order and partitions kept.\n")
	} else {
		b.WriteString("\nPASSED: nothing lost, the filter dropped exactly the marked records, order and partitions kept.\n")
	}
	d.view.text(b.String())
}

func inSync(r *Result) string {
	for _, t := range r.Topics {
		if t.SourcePartitions != t.TargetPartitions {
			return "MISMATCH"
		}
	}
	return "in sync"
}

func (d *demo) keepRunning(ctx context.Context) {
	fmt.Fprintf(d.opts.Out, "\nThe clusters keep running until Ctrl-C:\n  source: %s\n  target: %s\n  for example: kcat -b %s -C -t %s -o beginning -e\n",
		strings.Join(d.srcBrokers, ","), strings.Join(d.dstBrokers, ","), d.dstBrokers[0], topicEU)
	<-ctx.Done()
	fmt.Fprintln(d.opts.Out, "Shutting the clusters down.")
}

// explainTailLines is how many lines of the engine's log explain quotes.
const explainTailLines = 15

// explain adds the tail of the engine's log to an error, where the cause usually is.
func (d *demo) explain(err error) error {
	if d.logPath == "" || errors.Is(err, context.Canceled) {
		return err
	}
	tail, rerr := engineproc.TailFile(d.logPath, explainTailLines)
	if rerr != nil || tail == "" {
		return err
	}
	return fmt.Errorf("%w\nlast lines of the engine log %s:\n  %s", err, d.logPath, strings.ReplaceAll(tail, "\n", "\n  "))
}

// close stops whatever is still running, the clean way first: an engine still running
// (Ctrl-C) gets SIGTERM and drains before the clusters go away.
func (d *demo) close() {
	d.view.done()
	d.mu.Lock()
	p := d.engine
	d.expected = true
	d.mu.Unlock()
	if p != nil {
		select {
		case <-p.Done():
		default:
			_ = p.Stop(15 * time.Second)
		}
	}
	if d.observer != nil {
		d.observer.source.Close()
		d.observer.target.Close()
	}
	for _, a := range []sarama.ClusterAdmin{d.srcAdmin, d.dstAdmin} {
		if a != nil {
			a.Close()
		}
	}
	if d.log != nil {
		d.log.Close()
	}
	if d.clusters != nil {
		d.clusters.close()
	}
	d.removeWorkDir()
}

// removeWorkDir deletes the temporary work directory after a run that went through, and
// otherwise says where it is: its engine log is what explains a failure.
func (d *demo) removeWorkDir() {
	if d.tempDir == "" {
		return
	}
	if d.passed {
		if err := os.RemoveAll(d.tempDir); err != nil {
			fmt.Fprintf(d.opts.Out, "Could not remove the work directory %s: %v\n", d.tempDir, err)
		}
		return
	}
	fmt.Fprintf(d.opts.Out, "The engine's config and log are kept in %s (remove it when done).\n", d.tempDir)
}
