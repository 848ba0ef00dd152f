package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

// Backoff between failed Consume calls (coordinator unreachable, ...), never a hot loop.
const (
	consumeRetryMin = time.Second
	consumeRetryMax = 30 * time.Second
)

// Backoff between attempts of one commit that the coordinator refused with a retriable
// error (it moved, is loading its offsets): a coordinator move takes a second or so.
const (
	commitRetryMin = 100 * time.Millisecond
	commitRetryMax = time.Second
)

// finalCommitLimit is how long a session's last commit may retry after the drain
// deadline (the session's end + the drain limit). It fits inside drainMargin, which
// keeps the rebalance timeout free for the commit and the rejoin.
const finalCommitLimit = 5 * time.Second

// stream is one consumer-group member: a sarama ConsumerGroup and its handler.
type stream struct {
	e      *Engine
	id     int
	log    logr.Logger
	client sarama.Client // the group's own client, which commits
	// instanceID is the stream's static membership ID ("" for a dynamic member).
	instanceID string

	mu  sync.Mutex
	cur *sessionState
	// memberID is the member ID of the stream's latest session: a static member leaves
	// under it (leave).
	memberID string
	// subscribed is the topic list of the current Consume call; endSession ends that
	// call's session; rejoin asks runStream to leave the group before the next one, so
	// that the group assigns its partitions anew (checkStaticAssignment); checked tells
	// whether the stream's first session was checked.
	subscribed []string
	endSession context.CancelFunc
	rejoin     bool
	checked    bool
}

// sessionState is one group session (one generation) of a stream.
type sessionState struct {
	committer offsetCommitter
	// ids are the source topics' IDs when the session started: the incarnation its
	// claims read and every position they store names (incarnation.go).
	ids    map[string]string
	mu     sync.Mutex // guards claims
	claims []*claimState
	// commitMu makes the periodic and the final commits take turns; it also guards
	// every claim's confirmed offset.
	commitMu sync.Mutex
	stop     chan struct{}
	done     chan struct{}

	// drain ends e.life.drainLimit after the session's context ended (a stop, a rebalance),
	// or at once when the engine fails: every claim of the session drains until then.
	// final ends finalCommitLimit later: the session's last commits retry until then.
	drain, final        context.Context
	endDrain, endFinals context.CancelFunc
}

// runStream joins the consumer group and consumes the selected topics until ctx ends or
// the engine fails. A change of the selected topics ends the current session so that
// the next Consume call subscribes to the new list.
func (e *Engine) runStream(ctx context.Context, id int) error {
	iid := instanceID(e.cfg, id)
	client, err := e.streamClients.take(ctx, e, id)
	if ctx.Err() != nil {
		// A stop before the stream's client was made is not a failure.
		if client != nil {
			_ = client.Close()
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer client.Close()
	group, err := sarama.NewConsumerGroupFromClient(e.cfg.ConsumerGroup, client)
	if err != nil {
		return fmt.Errorf("while joining consumer group %q on the source cluster: %w", e.cfg.ConsumerGroup, err)
	}
	s := &stream{e: e, id: id, log: e.log.WithValues("stream", id), client: client, instanceID: iid}
	if iid != "" {
		s.log = s.log.WithValues("groupInstanceId", iid)
	}
	errsDone := make(chan struct{})
	go func() { defer close(errsDone); s.readErrors(group.Errors()) }()
	defer func() {
		if err := group.Close(); err != nil {
			s.log.Error(err, "Failed to leave the consumer group")
		}
		s.leave()
		<-errsDone
	}()

	retry := newBackoff(consumeRetryMin, consumeRetryMax)
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
		s.mu.Lock()
		s.subscribed, s.endSession = list, ccancel
		s.mu.Unlock()
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
		if s.takeRejoin() && ctx.Err() == nil && !e.isFailed() {
			// The session drained and committed; leaving makes the next join a new
			// member's, which the group answers with a rebalance.
			s.leave()
		}
		switch {
		case err == nil || ctx.Err() != nil || e.isFailed():
			retry.reset()
		case errors.Is(err, sarama.ErrClosedConsumerGroup):
			return nil
		case errors.Is(err, sarama.ErrFencedInstancedId):
			// Rejoining would fence the other process in turn, and the two would take
			// the partitions from each other for good.
			e.fail(fmt.Errorf("another process joined consumer group %q on the source cluster as static member %q: consumer.groupInstanceId must differ between the processes of a group: %w",
				e.cfg.ConsumerGroup, iid, err))
			return nil
		default:
			wait := retry.next()
			var refused *notAuthorizedError
			if errors.As(err, &refused) {
				// A missing ACL (the target refusing the transactional ids): named, and
				// Ready's answer, rather than blamed on consuming.
				e.refusals.refused(s.id, refused, wait)
			} else if errors.Is(err, context.Canceled) {
				// Setup saw its session end (another member joined or left) before
				// the claims started: a rebalance, not a failure.
				s.log.Info("The consumer group session ended during its setup (a rebalance); joining again", "group", e.cfg.ConsumerGroup, "backoff", wait)
			} else {
				s.log.Error(err, "Failed to consume from the source cluster; retrying", "group", e.cfg.ConsumerGroup, "backoff", wait)
			}
			select {
			case <-ctx.Done():
			case <-e.failed:
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// readErrors logs the group's errors and stops the engine when a committed offset fell
// out of the source's retention: skipping the gap silently would be data loss, so a
// person must decide. Commit failures do not arrive here: the committer reads them
// (commitSession).
func (s *stream) readErrors(errs <-chan error) {
	for err := range errs {
		var ce *sarama.ConsumerError
		if errors.As(err, &ce) && errors.Is(ce.Err, sarama.ErrOffsetOutOfRange) {
			// A topic deleted and created again under a running session answers the old
			// incarnation's offset with out-of-range before the topic loop sees the new
			// ID: that is no gap, the sessions restart on the new incarnation.
			if s.e.recreatedUnder(ce.Topic, s.sessionTopicID(ce.Topic)) {
				continue
			}
			s.e.fail(outOfRangeError(s.e.cfg, ce.Topic, ce.Partition, ce.Err))
			continue
		}
		s.log.Error(err, "Consumer group reported an error")
	}
}

// sessionTopicID is the ID topic had when the current session started ("" when
// unknown or when no session runs).
func (s *stream) sessionTopicID(topic string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return ""
	}
	return s.cur.ids[topic]
}

// outOfRangeError is the fatal error of a partition whose offset to resume from fell
// out of the source's retention. It names the remedy, which is the same in both
// delivery modes: with exactlyOnce the engine resumes from the offset stored in its
// last target transaction, except when the source group's offset is ahead of it
// (exactlyOnce.assign), which only a reset like this one makes it.
func outOfRangeError(cfg *config.Config, topic string, partition int32, err error) error {
	remedy := fmt.Sprintf("to accept the gap, stop the mirror and reset the group's offset for this partition to its first offset: "+
		"kafka-consumer-groups --bootstrap-server %s --group %s --topic %s:%d --reset-offsets --to-earliest --execute",
		strings.Join(cfg.Source.BootstrapServers, ","), cfg.ConsumerGroup, topic, partition)
	if cfg.ExactlyOnce() {
		remedy += " (with delivery exactlyOnce too: the engine starts from a source group offset that is ahead of the offset stored in its last target transaction)"
	}
	return fmt.Errorf("source partition %s/%d: the offset to resume from is out of range in group %q, records were deleted before they were mirrored; %s: %w",
		topic, partition, cfg.ConsumerGroup, remedy, err)
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
	ss := &sessionState{
		ids:       e.topics.topicIDs(),
		committer: newProgressCommitter(groupCommitter{client: s.client, group: e.cfg.ConsumerGroup, session: sess}, e.keeper),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if e.txn != nil {
		// The target-side group is written inside the transactions (txn.go); the
		// source group's offset follows them, for lag and people.
		ss.committer = groupCommitter{client: s.client, group: e.cfg.ConsumerGroup, session: sess}
	}
	ss.drain, ss.endDrain = afterEnd(sess.Context(), e.life.drainLimit, e.failed)
	ss.final, ss.endFinals = afterEnd(sess.Context(), e.life.drainLimit+finalCommitLimit, e.abortCh)
	s.mu.Lock()
	s.cur = ss
	s.memberID = sess.MemberID()
	first := !s.checked
	s.checked = true
	s.mu.Unlock()
	if first && s.instanceID != "" {
		go s.checkStaticAssignment(sess)
	}
	go e.commitLoop(sess.Context(), ss)
	// Partitions the source group has no offset for resume from the target-side
	// progress, before any claim starts. An error ends the session (sarama still calls
	// Cleanup, which finds ss) and the stream joins again after its backoff.
	var resumed []partitionKey
	var err error
	if e.txn != nil {
		err = e.txn.assign(sess, s.client, ss.ids, s.log)
	} else {
		resumed, err = e.keeper.resume(sess, s.client, ss.ids, s.log)
	}
	e.keeper.setupDone()
	if err != nil {
		return err
	}
	e.refusals.started(s.id)
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
	defer ss.endFinals()
	defer ss.endDrain()
	if e.txn != nil {
		e.txn.release(sess)
	}
	if e.aborted.Load() {
		return nil
	}
	e.commitSession(ss.final, ss)
	if e.listener != nil {
		_ = e.listener.OnRevoked(context.Background(), claimsOf(sess))
	}
	s.log.V(1).Info("Released partitions", "generation", sess.GenerationID())
	return nil
}

// commitLoop commits the session's acked offsets every offsetCommitInterval. A commit
// retries at most until the next tick or the session's end, when the final commits
// take over.
func (e *Engine) commitLoop(session context.Context, ss *sessionState) {
	defer close(ss.done)
	interval := e.cfg.OffsetCommitInterval.Duration
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ss.stop:
			return
		case <-e.abortCh:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(session, interval)
			e.commitSession(ctx, ss)
			cancel()
			e.probeIdle(ss)
		}
	}
}

// commitSession commits every claim's commit point that the group coordinator has not
// confirmed yet, and retries the partitions refused with a retriable error, with
// backoff, until ctx ends. Only a confirmed commit moves a partition's committed
// gauge (and so its lag) and counts in commits; a partition not confirmed is sent
// again on the next commit even when its commit point did not move. The first attempt
// is always made, even when ctx already ended.
func (e *Engine) commitSession(ctx context.Context, ss *sessionState) {
	if e.aborted.Load() {
		return
	}
	ss.commitMu.Lock()
	defer ss.commitMu.Unlock()
	ss.mu.Lock()
	claims := slices.Clone(ss.claims)
	ss.mu.Unlock()
	retry := newBackoff(commitRetryMin, commitRetryMax)
	for attempt := 1; ; attempt++ {
		err := e.commitOnce(ss, claims)
		if err == nil {
			return
		}
		wait := retry.next()
		select {
		case <-ctx.Done():
			e.log.Error(err, "Failed to commit offsets in time; they stay uncommitted until a later commit, or the partition's next owner reads again from the last commit",
				"group", e.cfg.ConsumerGroup, "attempts", attempt)
			return
		case <-e.abortCh:
			return
		case <-time.After(wait):
			e.log.V(1).Info("Retrying an offset commit the coordinator refused", "group", e.cfg.ConsumerGroup, "attempt", attempt, "backoff", wait, "reason", err.Error())
		}
	}
}

// commitOnce sends one commit of every unconfirmed commit point and records what the
// coordinator confirmed. It returns an error when a retriable refusal (or no answer)
// left something to send again, nil otherwise; a final refusal is logged here.
func (e *Engine) commitOnce(ss *sessionState, claims []*claimState) error {
	var offs []commitOffset
	var owners []*claimState
	for _, c := range claims {
		if cp, ok := c.tracker.CommitPoint(); ok && cp > c.confirmed {
			offs = append(offs, commitOffset{topic: c.topic, partition: c.part.partition, next: cp, topicID: c.topicID})
			owners = append(owners, c)
		}
	}
	if len(offs) == 0 {
		return nil
	}
	if err := ss.committer.Commit(offs); err != nil {
		if retriableCommitError(err) {
			return err
		}
		e.log.Error(err, "Failed to commit offsets", "group", e.cfg.ConsumerGroup)
		return nil
	}
	var retry error
	confirmed := false
	for i, o := range offs {
		c := owners[i]
		switch {
		case o.err == nil:
			c.confirmed = o.next
			c.part.committed.Store(o.next)
			confirmed = true
		case retriableCommitError(o.err):
			retry = fmt.Errorf("while committing offset %d of %s/%d: %w", o.next, o.topic, o.partition, o.err)
		default:
			e.log.Error(o.err, "The group coordinator refused an offset commit; it is sent again on the next commit of this session",
				"group", e.cfg.ConsumerGroup, "topic", o.topic, "partition", o.partition, "offset", o.next)
		}
	}
	if confirmed {
		e.commits.Add(1)
		e.metrics.commits.Inc()
	}
	return retry
}

// afterEnd returns a context that ends limit after parent ended, or as soon as stop is
// closed. cancel releases it early.
func afterEnd(parent context.Context, limit time.Duration, stop <-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		select {
		case <-parent.Done():
		case <-stop:
			cancel()
			return
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-t.C:
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
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
