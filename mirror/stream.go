package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// Backoff between failed Consume calls (coordinator unreachable, ...), never a hot loop.
const (
	consumeRetryMin = time.Second
	consumeRetryMax = 30 * time.Second
)

// stream is one consumer-group member: a sarama ConsumerGroup and its handler.
type stream struct {
	e   *Engine
	id  int
	log logr.Logger

	mu  sync.Mutex
	cur *sessionState
}

// sessionState is one group session (one generation) of a stream.
type sessionState struct {
	committer offsetCommitter
	mu        sync.Mutex
	claims    []*claimState
	stop      chan struct{}
	done      chan struct{}
}

// runStream joins the consumer group and consumes the selected topics until ctx ends or
// the engine fails. A change of the selected topics ends the current session so that
// the next Consume call subscribes to the new list.
func (e *Engine) runStream(ctx context.Context, id int) error {
	cc, err := kafka.ConsumerConfig(e.cfg, e.kafkaOpts...)
	if err != nil {
		return err
	}
	if e.tune != nil {
		e.tune(cc)
	}
	client, err := kafka.NewClientFromConfig(e.cfg.Source, cc, append([]kafka.Option{kafka.WithRole(kafka.RoleSource)}, e.kafkaOpts...)...)
	if err != nil {
		return err
	}
	defer client.Close()
	group, err := sarama.NewConsumerGroupFromClient(e.cfg.ConsumerGroup, client)
	if err != nil {
		return fmt.Errorf("while joining consumer group %q on the source cluster: %w", e.cfg.ConsumerGroup, err)
	}
	s := &stream{e: e, id: id, log: e.log.WithValues("stream", id)}
	errsDone := make(chan struct{})
	go func() { defer close(errsDone); s.readErrors(group.Errors()) }()
	defer func() {
		if err := group.Close(); err != nil {
			s.log.Error(err, "Failed to leave the consumer group")
		}
		<-errsDone
	}()

	wait := consumeRetryMin
	for ctx.Err() == nil && !e.isFailed() {
		list, changed := e.topics.get()
		if len(list) == 0 {
			select {
			case <-changed:
			case <-ctx.Done():
			case <-e.failed:
			}
			continue
		}
		cctx, ccancel := context.WithCancel(ctx)
		watchDone := make(chan struct{})
		go func() {
			select {
			case <-changed:
				s.log.V(1).Info("Restarted the group session: the selected topics changed")
				ccancel()
			case <-watchDone:
			}
		}()
		err := group.Consume(cctx, list, s)
		close(watchDone)
		ccancel()
		switch {
		case err == nil || ctx.Err() != nil || e.isFailed():
			wait = consumeRetryMin
		case errors.Is(err, sarama.ErrClosedConsumerGroup):
			return nil
		default:
			s.log.Error(err, "Failed to consume from the source cluster; retrying", "group", e.cfg.ConsumerGroup, "backoff", wait)
			select {
			case <-ctx.Done():
			case <-e.failed:
			case <-time.After(wait):
			}
			wait = min(wait*2, consumeRetryMax)
		}
	}
	return nil
}

// readErrors logs the group's errors (commit failures among them) and stops the engine
// when a committed offset fell out of the source's retention: skipping the gap silently
// would be data loss, so a person must decide.
func (s *stream) readErrors(errs <-chan error) {
	for err := range errs {
		var ce *sarama.ConsumerError
		if errors.As(err, &ce) && errors.Is(ce.Err, sarama.ErrOffsetOutOfRange) {
			s.e.fail(fmt.Errorf("source partition %s/%d: the committed offset of group %q is out of range, records were deleted before they were mirrored; "+
				"reset the group's offset for this partition to accept the gap: %w", ce.Topic, ce.Partition, s.e.cfg.ConsumerGroup, ce.Err))
			continue
		}
		s.log.Error(err, "Consumer group reported an error")
	}
}

// Setup starts a session: counts the rebalance, starts the periodic commit and tells
// the rebalance listener.
func (s *stream) Setup(sess sarama.ConsumerGroupSession) error {
	e := s.e
	e.rebalances.Add(1)
	e.metrics.rebalances.Inc()
	if !e.streamSeen[s.id].Swap(true) {
		e.joined.Add(1)
	}
	ss := &sessionState{committer: newProgressCommitter(groupCommitter{sess}, e.keeper), stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.cur = ss
	s.mu.Unlock()
	go e.commitLoop(ss)
	// Partitions the source group has no offset for resume from the target-side
	// progress, before any claim starts. An error ends the session (sarama still calls
	// Cleanup, which finds ss) and the stream joins again after its backoff.
	resumed, err := e.keeper.resume(sess, s.log)
	if err != nil {
		return err
	}
	for _, tp := range resumed {
		e.parts.get(tp.topic, tp.partition).resumed.Add(1)
	}
	tps := claimsOf(sess)
	s.log.Info("Joined the consumer group", "group", e.cfg.ConsumerGroup, "generation", sess.GenerationID(),
		"partitions", formatPartitions(tps))
	if e.listener != nil {
		_ = e.listener.OnAssigned(sess.Context(), tps)
	}
	return nil
}

// Cleanup ends a session after every ConsumeClaim returned: a last commit, then the
// rebalance listener.
func (s *stream) Cleanup(sess sarama.ConsumerGroupSession) error {
	e := s.e
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	close(ss.stop)
	<-ss.done
	if e.aborted.Load() {
		return nil
	}
	e.commitSession(ss)
	if e.listener != nil {
		_ = e.listener.OnRevoked(context.Background(), claimsOf(sess))
	}
	s.log.V(1).Info("Released partitions", "generation", sess.GenerationID())
	return nil
}

// ConsumeClaim mirrors one partition for the session, then drains it: it stops reading,
// waits (at most the drain limit, inside the rebalance timeout) until every record it
// sent was acked, and commits, so that the next owner starts exactly where this one
// stopped and a clean rebalance or shutdown mirrors nothing twice.
func (s *stream) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	e := s.e
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	part := e.parts.get(claim.Topic(), claim.Partition())
	c := &claimState{
		part:       part,
		tracker:    offsets.New(min(e.cfg.MaxInFlightPerPartition, 1<<16)),
		topic:      claim.Topic(),
		target:     e.sel.TargetName(claim.Topic()),
		lastMarked: -1,
	}
	ss.mu.Lock()
	ss.claims = append(ss.claims, c)
	ss.mu.Unlock()
	part.attach(c.tracker, claim)
	defer part.detach()

	err := e.consumeClaim(sess.Context(), c, claim)
	if e.aborted.Load() {
		return nil
	}
	if err != nil && !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		e.fail(err)
	}
	if !e.isFailed() {
		// A fatal error during the drain ends it: nothing more will be committed past
		// the failure, and the stop must not wait for a target that cannot deliver.
		ctx, cancel := context.WithTimeout(context.Background(), e.drainLimit)
		go func() {
			select {
			case <-e.failed:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := c.tracker.WaitBelow(ctx, 1); err != nil && !e.isFailed() {
			s.log.Info("Timed out draining a released partition; committing what the target acked",
				"topic", c.topic, "partition", part.partition, "inFlight", c.tracker.InFlight(), "drainLimit", e.drainLimit)
		}
		cancel()
	}
	// After a fatal error the commit point still stops below the failed record, which is
	// never acked, so committing it is safe and keeps the work already done.
	e.commitSession(ss)
	return nil
}

// consumeClaim is the read loop of one partition.
func (e *Engine) consumeClaim(ctx context.Context, c *claimState, claim sarama.ConsumerGroupClaim) error {
	msgs := claim.Messages()
	done := ctx.Done()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			if err := e.mirrorRecord(ctx, c, m); err != nil {
				return err
			}
		case <-done:
			return nil
		case <-e.failed:
			return errStopped
		}
	}
}

// commitLoop commits the session's acked offsets every offsetCommitInterval.
func (e *Engine) commitLoop(ss *sessionState) {
	defer close(ss.done)
	t := time.NewTicker(e.cfg.OffsetCommitInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ss.stop:
			return
		case <-e.abortCh:
			return
		case <-t.C:
			e.commitSession(ss)
			e.probeIdle(ss)
		}
	}
}

// commitSession marks every claim's commit point that moved and commits them at once.
func (e *Engine) commitSession(ss *sessionState) {
	if e.aborted.Load() {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	dirty := false
	for _, c := range ss.claims {
		if cp, ok := c.tracker.CommitPoint(); ok && cp > c.lastMarked {
			ss.committer.Mark(c.topic, c.part.partition, cp)
			c.lastMarked = cp
			dirty = true
		}
	}
	if !dirty {
		return
	}
	ss.committer.Flush()
	e.commits.Add(1)
	e.metrics.commits.Inc()
	for _, c := range ss.claims {
		if c.lastMarked >= 0 {
			c.part.committed.Store(c.lastMarked)
		}
	}
}

func claimsOf(sess sarama.ConsumerGroupSession) []handler.TopicPartition {
	var tps []handler.TopicPartition
	for topic, parts := range sess.Claims() {
		for _, p := range parts {
			tps = append(tps, handler.TopicPartition{Topic: topic, Partition: p})
		}
	}
	return tps
}

func formatPartitions(tps []handler.TopicPartition) string {
	parts := make([]string, len(tps))
	for i, tp := range tps {
		parts[i] = fmt.Sprintf("%s/%d", tp.Topic, tp.Partition)
	}
	return strings.Join(parts, ",")
}
