package mirror

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// fatalDrainLimit bounds the wait for the producer after a fatal error: the streams
// have already committed everything acked, so waiting longer only delays the restart.
const fatalDrainLimit = 3 * time.Second

// Backoff between attempts to connect to the clusters at start: never a hot loop, and
// a cluster that comes back is found within connectRetryMax.
const (
	connectRetryMin = time.Second
	connectRetryMax = 30 * time.Second
)

// closeGrace is the least time Run gives the producer and the clients to close after
// the streams ended, even when the drain deadline has already passed: against a
// healthy target closing takes milliseconds.
const closeGrace = time.Second

// drainMargin is kept free inside the group's rebalance timeout after the drain, for
// the commit and the rejoin.
const drainMargin = 10 * time.Second

// lifecycle is the engine's start and stop: it connects to both clusters (retrying
// until they answer), says whether Run connected, ran and returned, and bounds the
// stop: the drain limit, and the deadlines Run waits for the producer, the progress
// keeper and the clients until. Engine.Run is the outline that calls into it.
type lifecycle struct {
	cfg       *config.Config
	log       logr.Logger
	kafkaOpts []kafka.Option
	// drainLimit is how long a released partition (a stop, a rebalance) waits for its
	// records in flight to be acked before it commits.
	drainLimit time.Duration

	// connectErr is the last failure to connect at start, nil once connected.
	connectErr atomic.Pointer[error]
	connected  atomic.Bool

	runOnce  atomic.Bool
	returned atomic.Bool // Run has returned

	// abandoned counts the start-up steps Run stopped waiting for (untilStopped) that
	// have not ended yet; Closed waits for them.
	abandoned sync.WaitGroup
}

func newLifecycle(cfg *config.Config, log logr.Logger, kafkaOpts []kafka.Option, drainLimit time.Duration) *lifecycle {
	return &lifecycle{cfg: cfg, log: log, kafkaOpts: kafkaOpts, drainLimit: drainLimit}
}

// drainLimitFor returns the drain limit: the configured drain timeout when set, else
// the group's rebalance timeout minus drainMargin (at least half of it).
func drainLimitFor(configured time.Duration, cc *sarama.Config) time.Duration {
	limit := configured
	if limit <= 0 {
		limit = max(cc.Consumer.Group.Rebalance.Timeout-drainMargin, cc.Consumer.Group.Rebalance.Timeout/2)
	}
	return limit
}

// closeDeadline is when Run stops waiting for the producer and the clients to close:
// the drain limit after the stop (stoppedAt, unix nanoseconds; 0 when not recorded),
// fatalDrainLimit from now after a fatal error (failed), and never less than closeGrace
// from now.
func (l *lifecycle) closeDeadline(stoppedAt int64, failed bool) time.Time {
	now := time.Now()
	if failed {
		return now.Add(min(l.drainLimit, fatalDrainLimit))
	}
	stop := now
	if stoppedAt > 0 {
		stop = time.Unix(0, stoppedAt)
	}
	return later(stop.Add(l.drainLimit), now.Add(closeGrace))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waitUntil waits for done until deadline and reports whether done was closed.
func waitUntil(deadline time.Time, done <-chan struct{}) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// untilStopped runs step, one of Run's start-up steps, on its own goroutine and waits
// for it only until ctx ends (a stop, Abort). A step that talks to a cluster can wait
// for a broker that reads requests and never answers: sarama gives each request its
// read timeout (Net.ReadTimeout, 30 s) and retries some of them for deliveryTimeout, so
// a stop at start waited 30 s and more. When ctx ends first, untilStopped returns ctx's
// error at once and leaves step to end in the background (counted in abandoned). undo,
// when set, closes whatever step opened whenever its result is not used: after step
// failed, or after an abandoned step ended.
func (l *lifecycle) untilStopped(ctx context.Context, step func() error, undo func()) error {
	done := make(chan error, 1)
	l.abandoned.Add(1)
	go func() {
		defer l.abandoned.Done()
		done <- step()
	}()
	select {
	case err := <-done:
		if err != nil && undo != nil {
			undo()
		}
		return err
	case <-ctx.Done():
		l.abandoned.Add(1)
		go func() {
			defer l.abandoned.Done()
			<-done
			if undo != nil {
				undo()
			}
		}()
		return ctx.Err()
	}
}

// stopKeeper makes the progress keeper write the streams' last commits to the target
// (after Abort it writes nothing more, as after a kill) and returns until when Run
// waits for it: the write overlaps the producer's drain, so a target that stopped
// answering delays the stop by neither twice.
func (l *lifecycle) stopKeeper(stop chan struct{}, failed bool) time.Time {
	close(stop)
	limit := min(progressFlushLimit, l.drainLimit)
	if failed {
		limit = min(limit, fatalDrainLimit)
	}
	return time.Now().Add(limit)
}

// awaitKeeper waits for the progress keeper's last write until deadline.
func (l *lifecycle) awaitKeeper(done chan struct{}, deadline time.Time) {
	if !waitUntil(deadline, done) {
		l.log.Info("Stopped waiting to write the progress to the target cluster; the source group holds it")
	}
}

// connections are the clients Run opens once and closes at the end.
type connections struct {
	sourceAdmin sarama.ClusterAdmin
	targetAdmin sarama.ClusterAdmin
	sourceMeta  sarama.Client
	targetMeta  sarama.Client // the target admin's client
	// The producers and their clients are made by sender.openProducers: the
	// batching producers (producers[i] with clients[i]) and the single-record one.
	producers    []sarama.AsyncProducer
	clients      []sarama.Client
	single       sarama.AsyncProducer
	singleClient sarama.Client
}

func (c *connections) close() {
	closers := []interface{ Close() error }{c.sourceAdmin, c.targetAdmin, c.singleClient}
	for _, cl := range c.clients {
		closers = append(closers, cl)
	}
	for _, cl := range closers {
		if cl != nil {
			_ = cl.Close()
		}
	}
}

// closeProducers closes the producers sender.openProducers made and their clients,
// those it made.
func (c *connections) closeProducers() {
	for _, p := range append(slices.Clone(c.producers), c.single) {
		if p != nil {
			_ = p.Close()
		}
	}
	for _, cl := range append(slices.Clone(c.clients), c.singleClient) {
		if cl != nil {
			_ = cl.Close()
		}
	}
}

// connectWithRetry connects to both clusters, retrying with capped exponential backoff
// until it succeeds or ctx ends. Every failure is retried, bad credentials and
// untrusted certificates included: connect reads the credential and certificate files
// again on each attempt, so a corrected Secret (which the kubelet updates in the
// mounted volume) is picked up without a restart. Each failed attempt logs one error
// line naming the cluster and the cause, and /readyz answers with it.
func (l *lifecycle) connectWithRetry(ctx context.Context) (*connections, error) {
	retry := newBackoff(connectRetryMin, connectRetryMax)
	for attempt := 1; ; attempt++ {
		var conns *connections
		err := l.untilStopped(ctx, func() (err error) {
			conns, err = l.connect()
			return err
		}, func() {
			if conns != nil {
				conns.close()
			}
		})
		if err == nil {
			l.connectErr.Store(nil)
			l.connected.Store(true)
			if attempt > 1 {
				l.log.Info("Connected to the clusters", "attempts", attempt)
			}
			return conns, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l.connectErr.Store(&err)
		wait := retry.next()
		l.log.Error(err, "Failed to connect; retrying", "attempt", attempt, "backoff", wait.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (l *lifecycle) connect() (*connections, error) {
	c := &connections{}
	ok := false
	defer func() {
		if !ok {
			c.close()
		}
	}()
	var err error
	sc, err := kafka.AdminConfig(l.cfg, kafka.RoleSource, l.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	srcClient, err := kafka.NewClientFromConfig(l.cfg.Source, sc, append([]kafka.Option{kafka.WithRole(kafka.RoleSource)}, l.kafkaOpts...)...)
	if err != nil {
		return nil, err
	}
	if c.sourceAdmin, err = sarama.NewClusterAdminFromClient(srcClient); err != nil {
		_ = srcClient.Close()
		return nil, fmt.Errorf("while creating the source cluster admin: %w", err)
	}
	c.sourceMeta = srcClient

	tc, err := kafka.AdminConfig(l.cfg, kafka.RoleTarget, l.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	// The internal topics are read through this client (readTopicToEnd): a fetch error
	// such as a missing Read ACL must reach the reader, not be logged by sarama and
	// retried until the reader's time limit.
	tc.Consumer.Return.Errors = true
	tgtClient, err := kafka.NewClientFromConfig(l.cfg.Target, tc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, l.kafkaOpts...)...)
	if err != nil {
		return nil, err
	}
	c.targetMeta = tgtClient
	if c.targetAdmin, err = sarama.NewClusterAdminFromClient(tgtClient); err != nil {
		_ = tgtClient.Close()
		return nil, fmt.Errorf("while creating the target cluster admin: %w", err)
	}
	openBrokers(srcClient)
	openBrokers(tgtClient)

	ok = true
	return c, nil
}

// openBrokers starts connecting client to every broker its metadata names (sarama's
// Open does not wait). The first topic loop's admin requests go to any of them and the
// group coordinators and leaders are among them: across a distance each new
// connection's handshake is a round trip that the start would otherwise wait for, one
// step after the other.
func openBrokers(client sarama.Client) {
	for _, b := range client.Brokers() {
		_ = b.Open(client.Config())
	}
}
