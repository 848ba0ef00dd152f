package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Engine mirrors the selected topics of one config. Build it with New and start it
// with Run; an Engine runs once.
type Engine struct {
	cfg       *config.Config
	log       logr.Logger
	kafkaOpts []kafka.Option
	progress  time.Duration
	tune      func(*sarama.Config)
	// streamClients are the streams' source clients, made early in Run.
	streamClients *streamClients
	// sourceRTT is the source's round trip measured at the start (prepareStreamClients),
	// in nanoseconds; 0 until then.
	sourceRTT atomic.Int64

	chain       handler.Handler
	passThrough bool
	listener    handler.RebalanceListener
	sel         *topics.Selector
	// provenance is nil unless loop prevention is on; Run resolves its cluster ids.
	provenance *provenance

	metrics  *metrics
	gatherer prometheus.Gatherer
	parts    partitionRegistry
	topics   topicSet
	// hiddenTopics says which topics.include expressions the source's ACLs may hide
	// (topicLoop.checkHidden), "" when none: Ready names it while nothing is selected.
	hiddenTopics atomic.Value

	// sender owns the producers, their acks, the size limits and the byte budget.
	sender *sender
	// syncs writes offset syncs and checkpoints translates group offsets; both nil
	// when groups is unset.
	syncs       *offsetSyncWriter
	checkpoints *groupCheckpointer
	// txn is the exactly-once path (txn.go), nil with delivery atLeastOnce.
	txn *exactlyOnce
	// Set by Run once connected.
	keeper   *progressKeeper
	caughtUp *caughtUp
	// initial holds the start offsets of initialPositions (failback.go), read by Run.
	initial initialPositions
	// failback translates group offsets below the failback points (failback.go), nil
	// unless initialPositions.fromFailover and groups are set.
	failback *failbackTranslation

	httpAddrMu  sync.Mutex
	httpAddress string

	commits, rebalances atomic.Int64
	// joined counts streams that started at least one group session.
	joined     atomic.Int64
	streamSeen []atomic.Bool
	// refusals are the streams' sessions refused for want of an ACL (refusal.go).
	refusals *refusals

	// life connects to the clusters and bounds the stop.
	life *lifecycle

	failOnce sync.Once
	failErr  error
	failed   chan struct{} // closed on the first fatal error
	closed   chan struct{} // closed when everything Run started has ended (Closed)
	aborted  atomic.Bool
	abortCh  chan struct{}
	abortMu  sync.Mutex
	cancel   context.CancelFunc
}

// New builds an engine for cfg, which must already be defaulted and validated. It
// compiles the handler chain and topic selection and registers the metrics; it does
// not connect to any cluster (Run does).
func New(cfg *config.Config, opts ...Option) (*Engine, error) {
	o := options{log: logr.Discard(), progressInterval: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	chain, err := handler.NewChain(cfg.Handlers, handler.WithLogger(o.log))
	if err != nil {
		return nil, fmt.Errorf("while building the handler chain: %w", err)
	}
	m := newMetrics()
	listener, err := handler.NewListener(cfg.RebalanceListener, handler.WithLogger(o.log),
		handler.OnListenerError(func(string, error) { m.listenerErrors.Inc() }))
	if err != nil {
		return nil, fmt.Errorf("while building the rebalance listener: %w", err)
	}
	sel, err := topics.NewSelector(cfg.Topics)
	if err != nil {
		return nil, fmt.Errorf("while compiling the topic selection: %w", err)
	}
	e := &Engine{
		cfg:         cfg,
		log:         o.log,
		kafkaOpts:   o.kafkaOpts,
		progress:    o.progressInterval,
		tune:        o.tuneSarama,
		chain:       chain,
		passThrough: len(cfg.Handlers) == 0,
		listener:    listener,
		sel:         sel,
		provenance:  newProvenance(cfg),
		metrics:     m,
		topics:      newTopicSet(),
		streamSeen:  make([]atomic.Bool, cfg.Streams),
		refusals:    newRefusals(o.log),
		failed:      make(chan struct{}),
		closed:      make(chan struct{}),
		abortCh:     make(chan struct{}),
	}
	e.sender = newSender(cfg, e.log, e.kafkaOpts, m, e.fail, e.failed)
	if cfg.ExactlyOnce() {
		e.txn = newExactlyOnce(e)
	}
	e.parts = partitionRegistry{parts: map[partitionKey]*partitionState{}, m: e.metrics}

	reg := o.registerer
	if reg == nil {
		// The engine's own registry also exports the Go runtime and process metrics
		// (memory, goroutines, CPU, open files) that the default registry would have.
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, e.gatherer = r, r
	} else if g, ok := reg.(prometheus.Gatherer); ok {
		e.gatherer = g
	} else {
		e.gatherer = prometheus.DefaultGatherer
	}
	if err := e.metrics.register(reg, &e.parts, e.sender.budget); err != nil {
		return nil, fmt.Errorf("while registering metrics: %w", err)
	}
	if cfg.GroupsEnabled() {
		if err := e.newCheckpoints(reg); err != nil {
			return nil, err
		}
	}

	cc, err := kafka.ConsumerConfig(cfg, e.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	e.life = newLifecycle(cfg, e.log, e.kafkaOpts, drainLimitFor(o.drainTimeout, cc))
	return e, nil
}

// ValidateConfig checks a defaulted config the way Run would: the file's own rules
// (Config.Validate) plus compiling the handler chain, the rebalance listener and the
// topic selection. Every problem is returned, each naming its field path.
func ValidateConfig(cfg *config.Config) error {
	var errs []error
	fileErr := cfg.Validate()
	if fileErr != nil {
		errs = append(errs, fileErr)
	}
	if _, err := handler.NewChain(cfg.Handlers); err != nil {
		errs = append(errs, err)
	}
	if _, err := handler.NewListener(cfg.RebalanceListener); err != nil {
		errs = append(errs, err)
	}
	// Validate already compiles the topic expressions; the selector is checked only
	// when it passed, so a bad expression is not reported twice.
	if fileErr == nil {
		if _, err := topics.NewSelector(cfg.Topics); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run mirrors until ctx ends or a fatal error happens. It first connects to both
// clusters, retrying with backoff (1 s doubling to 30 s) for as long as it takes, so a
// cluster that is down at start is waited for; /healthz and /readyz answer meanwhile.
// A record the target has not acknowledged within deliveryTimeout is a fatal error.
// When ctx ends, every stream stops
// fetching, waits for its in-flight records to be acked, commits and leaves its group;
// Run then returns nil. A fatal error (a send that finally failed, a handler error, a
// committed offset that fell out of the source's retention) stops the engine the same
// way, except that nothing past the failed record is committed, and Run returns the
// error.
func (e *Engine) Run(ctx context.Context) error {
	if !e.life.runOnce.CompareAndSwap(false, true) {
		return errors.New("the engine has already run; build a new one with New")
	}
	defer e.life.returned.Store(true)
	// Run returns within its shutdown deadline even when a cluster does not answer; the
	// parts it then leaves closing (lingering) end by themselves, and Closed tells when.
	var lingering sync.WaitGroup
	defer func() { go func() { lingering.Wait(); e.life.abandoned.Wait(); close(e.closed) }() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.abortMu.Lock()
	e.cancel = cancel
	e.abortMu.Unlock()

	// Background work that serves the streams: metrics endpoint, topic loop, progress.
	// /healthz and /readyz answer while the engine connects.
	bg, bgCtx := errgroup.WithContext(ctx)
	stopBackground := func() { cancel(); _ = bg.Wait() }
	// startFailed ends Run when a start-up step returned err. Each step is waited for
	// only until ctx ends (lifecycle.untilStopped): a stop at start is not an error,
	// whatever the step said.
	startFailed := func(err error) error {
		stopped := ctx.Err() != nil
		stopBackground()
		if stopped {
			return nil
		}
		return err
	}
	if err := e.startHTTP(bgCtx, bg); err != nil {
		stopBackground()
		return err
	}
	conns, err := e.life.connectWithRetry(ctx)
	if err != nil {
		stopBackground()
		// Only ctx ending (a stop or Abort) ends the retries; that is not an error.
		return nil
	}
	// The streams' clients and the source group's coordinator are readied while the
	// first topic loop runs and the producers start.
	e.streamClients = e.prepareStreamClients(conns.sourceMeta, &lingering)
	defer e.streamClients.abandon()
	lingering.Add(1)
	go func() {
		defer lingering.Done()
		if b, err := conns.sourceMeta.Coordinator(e.cfg.ConsumerGroup); err == nil {
			_ = b.Open(conns.sourceMeta.Config())
		}
	}()
	if e.provenance != nil {
		if err := e.life.untilStopped(ctx, func() error {
			return e.provenance.resolve(e.cfg.Provenance, conns.sourceMeta, conns.targetMeta)
		}, nil); err != nil {
			conns.close()
			return startFailed(err)
		}
		e.log.Info("Set up loop prevention", "header", e.cfg.Provenance.Header, "sourceCluster", string(e.provenance.sourceID),
			"targetCluster", string(e.provenance.targetID), "maxHops", e.provenance.maxHops, "strip", e.provenance.strip)
	}
	if err := e.life.untilStopped(ctx, func() (err error) {
		e.initial, e.failback, err = loadInitialPositions(ctx, e.cfg, conns.sourceMeta, e.log)
		return err
	}, nil); err != nil {
		conns.close()
		return startFailed(err)
	}
	e.keeper = newProgressKeeper(e, conns.sourceAdmin, conns.targetAdmin, conns.targetMeta)
	e.caughtUp = newCaughtUp(conns.sourceMeta, e.cfg.NoDataLossEnabled())
	connsOpen, producerOpen := true, false
	defer func() {
		if producerOpen {
			for _, p := range e.sender.producers {
				_ = p.Close()
			}
			_ = e.sender.single.Close()
		}
		if connsOpen {
			conns.close()
			// Caught-up probes end once the clients are closed.
			e.caughtUp.wait()
		}
	}()

	tl, err := newTopicLoop(e, conns)
	if err != nil {
		stopBackground()
		return err
	}
	if err := e.life.untilStopped(ctx, func() error { return tl.runOnce(ctx) }, nil); err != nil {
		return startFailed(err)
	}
	if e.txn == nil {
		// The first Setup's target-side look-ups, readied beside the producers' start
		// rather than after the join (progressKeeper.warm).
		lingering.Add(1)
		go func() { defer lingering.Done(); e.keeper.warm(bgCtx) }()
	} else {
		lingering.Add(1)
		go func() { defer lingering.Done(); warmTxnGroupCoordinator(conns.targetMeta, e.cfg.ConsumerGroup) }()
	}
	// The producers are sized by the limits of the target topics the first topic loop
	// synced and read. Creating them sends InitProducerId, which a target that hangs
	// does not answer: they are made apart from conns, so that a stop meanwhile leaves
	// them to be closed when they are made.
	made := &connections{targetMeta: conns.targetMeta}
	targets := e.targetTopicNames()
	if err := e.life.untilStopped(ctx, func() error { return e.sender.openProducers(made, targets) }, made.closeProducers); err != nil {
		return startFailed(err)
	}
	conns.producers, conns.clients, conns.single, conns.singleClient = made.producers, made.clients, made.single, made.singleClient
	producerOpen = true
	// The producers' metadata and connections to the leaders, readied while the streams
	// join (sender.warmProducers).
	lingering.Add(1)
	go func() { defer lingering.Done(); e.sender.warmProducers(conns.targetMeta, targets) }()
	stopSyncs := e.startCheckpoints(bgCtx, conns, bg.Go)
	defer stopSyncs(time.Now(), true)
	bg.Go(func() error { tl.run(bgCtx); return nil })
	bg.Go(func() error { e.logProgress(bgCtx); return nil })
	// The delivery watch runs until Run returns, not only while the streams run: the
	// records of a partition that is draining, or that a rebalance moved away, are
	// still watched during a shutdown and across reassignments (checkDelivery).
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); e.watchDelivery(watchCtx) }()
	defer func() { stopWatch(); <-watchDone }()

	// The target-side progress is written until the streams have made their last
	// commits, then once more.
	stopKeeper, keeperDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(keeperDone); e.keeper.run(stopKeeper, e.abortCh) }()

	// Acks are read until the producers are closed, after the streams drained.
	acksDone := make(chan struct{})
	lingering.Add(1)
	go func() { defer lingering.Done(); defer close(acksDone); e.sender.readAllAcks() }()

	// The shutdown's clock starts when ctx ends (a stop, a fatal error), as each
	// session's drain does, not when the streams are done.
	var stoppedAt atomic.Int64
	stopClock := context.AfterFunc(ctx, func() { stoppedAt.Store(time.Now().UnixNano()) })
	defer stopClock()

	streams, sctx := errgroup.WithContext(ctx)
	for id := 0; id < e.cfg.Streams; id++ {
		streams.Go(func() error { return e.runStream(sctx, id) })
	}
	streamErr := streams.Wait()
	if streamErr != nil {
		e.fail(streamErr)
	}
	keeperDeadline := e.life.stopKeeper(stopKeeper, e.isFailed())
	cancel()

	// The streams have committed what was acked; records still in flight are not
	// committed and will be mirrored again after a restart. A target that stopped
	// answering must not hold the process past its grace period, so everything from
	// here on is bounded by one deadline: the drain limit after the stop (the streams'
	// drains ended by then too), or a short one after a fatal error, when nothing more
	// will be committed and the producer is likely stuck on the failure.
	deadline := e.life.closeDeadline(stoppedAt.Load(), e.isFailed())
	bgDone := make(chan struct{})
	lingering.Add(1)
	go func() { defer lingering.Done(); defer close(bgDone); _ = bg.Wait() }()
	// The topic loop may be inside an admin request to a cluster that hangs.
	waitUntil(deadline, bgDone)

	producerOpen = false
	e.sender.closeBatching()
	if !waitUntil(deadline, acksDone) {
		e.log.Info("Stopped waiting for the target to ack the records in flight; they are not committed and will be mirrored again after a restart")
	}
	stopSyncs(deadline, e.aborted.Load())
	// The keeper's last write needs the target admin, so it ends before the clients close.
	e.life.awaitKeeper(keeperDone, keeperDeadline)
	// sarama's Broker.Close takes the broker's lock, which a request waiting for a free
	// in-flight slot (Net.MaxOpenRequests is 1) holds until the request before it gets
	// its answer or its read timeout (Net.ReadTimeout, 30 s) from a target that hangs.
	// So the clients close in a goroutine and Run waits for them only until the
	// deadline; the process exiting after Run frees whatever is left.
	connsOpen = false
	closed := make(chan struct{})
	lingering.Add(1)
	go func() { defer lingering.Done(); defer close(closed); conns.close() }()
	if !waitUntil(deadline, closed) {
		e.log.Info("Left the connections to the clusters closing in the background: a broker has not answered")
	}
	// Caught-up probes read the source; closing the clients ends one waiting for an answer.
	probesDone := make(chan struct{})
	lingering.Add(1)
	go func() { defer lingering.Done(); defer close(probesDone); e.caughtUp.wait() }()
	waitUntil(deadline, probesDone)

	select {
	case <-e.failed:
		if e.aborted.Load() && e.failErr == errAborted {
			return nil
		}
		return e.failErr
	default:
		return nil
	}
}

// Closed returns a channel that is closed once everything Run started has ended, the
// producers and the cluster clients included. Run itself returns within its shutdown
// deadline (the drain after a stop, a few seconds after a fatal error) even when a
// target does not answer, and leaves a producer that is still retrying to finish in
// the background; a process exits then, which ends it. A program that runs another
// engine in the same process after this one stopped on a fatal error waits for Closed
// first, or the old producer's retries could land between the new engine's writes.
func (e *Engine) Closed() <-chan struct{} { return e.closed }

// errAborted marks the stop caused by Abort.
var errAborted = errors.New("the engine was aborted")

// Abort stops the engine at once, as if its process had been killed: partitions are not
// drained, no offsets are committed, acks still arriving are not committed. It exists
// for crash-recovery tests only; Run then returns nil. Production code stops the engine
// by cancelling Run's context.
func (e *Engine) Abort() {
	if !e.aborted.CompareAndSwap(false, true) {
		return
	}
	close(e.abortCh)
	e.fail(errAborted)
	e.abortMu.Lock()
	cancel := e.cancel
	e.abortMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// fail records the first fatal error and stops every stream. After Run returned, a
// producer left closing in the background may still report its records as failed:
// they were never committed, so that is no error of the run.
func (e *Engine) fail(err error) {
	if e.life.returned.Load() {
		e.log.V(1).Info("Ignored an error after the engine stopped", "error", err.Error())
		return
	}
	e.failOnce.Do(func() {
		e.failErr = err
		close(e.failed)
		if err != errAborted {
			e.log.Error(err, "Stopped the mirror on a fatal error")
		}
	})
	e.abortMu.Lock()
	cancel := e.cancel
	e.abortMu.Unlock()
	if cancel != nil && err != errAborted {
		cancel()
	}
}

// isFailed reports whether a fatal error (or Abort) happened.
func (e *Engine) isFailed() bool {
	select {
	case <-e.failed:
		return true
	default:
		return false
	}
}

// Ready returns nil when the engine is mirroring: no fatal error happened, at least one
// source topic is selected, and every stream has joined its consumer group at least
// once (its first session started, so it owns its partitions, or none when there are
// more streams than partitions). Otherwise it returns the reason; /readyz answers with
// it. A later rebalance does not make the engine unready: it is brief and normal.
func (e *Engine) Ready() error {
	if e.isFailed() {
		return fmt.Errorf("stopped: %w", e.failErr)
	}
	if err := e.life.connectErr.Load(); err != nil {
		return fmt.Errorf("not connected, retrying: %w", *err)
	}
	if !e.life.connected.Load() {
		return errors.New("connecting to the clusters")
	}
	if list, _ := e.topics.get(); len(list) == 0 {
		if hidden, _ := e.hiddenTopics.Load().(string); hidden != "" {
			return fmt.Errorf("no source topic matches topics.include %q (minus topics.exclude): %s", e.cfg.Topics.Include, hidden)
		}
		return fmt.Errorf("no source topic matches topics.include %q (minus topics.exclude)", e.cfg.Topics.Include)
	}
	if refused := e.refusals.current(); refused != nil {
		return fmt.Errorf("not authorized, retrying: %w", refused)
	}
	if n := e.joined.Load(); n < int64(e.cfg.Streams) {
		return fmt.Errorf("%d of %d streams joined consumer group %q", n, e.cfg.Streams, e.cfg.ConsumerGroup)
	}
	return nil
}

// logProgress logs the totals every progress interval, at info level, so a long run
// shows it is alive without a line per record or per commit.
func (e *Engine) logProgress(ctx context.Context) {
	if e.progress <= 0 {
		return
	}
	t := time.NewTicker(e.progress)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s := e.Stats()
			assigned := 0
			for _, p := range s.Partitions {
				if p.Assigned {
					assigned++
				}
			}
			e.log.Info("Mirrored records", "records", s.Records, "recordsPerSecond", float64(s.Records-last)/e.progress.Seconds(),
				"bytes", s.Bytes, "filtered", s.Filtered, "inFlight", s.InFlight, "lag", s.Lag,
				"assignedPartitions", assigned, "commits", s.Commits, "rebalances", s.Rebalances)
			last = s.Records
		}
	}
}
