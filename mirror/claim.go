package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// A record's path through one claim (one source partition in one group session):
// ConsumeClaim sets the claim up and drains it at the end, readLoop reads its records,
// mirrorRecord takes each through the handler chain, awaits its target topic and hands
// it to the sender.

// Backoff while a partition waits for its target topic.
const (
	targetWaitMin = 500 * time.Millisecond
	targetWaitMax = 10 * time.Second
)

// claimState is what one ConsumeClaim keeps between records. Only its goroutine uses
// it, so nothing here needs a lock.
type claimState struct {
	// e is the engine the claim reports to; s sends its records.
	e       *Engine
	s       *sender
	part    *partitionState
	tracker *offsets.Tracker
	topic   string
	// topicID is the source topic's ID when the session started ("" when unknown):
	// every position the claim stores names it.
	topicID string
	// target is the renamed source topic, computed once per claim.
	target string
	// ready caches the target topics found ready for this claim and their partition
	// counts, so the per-record check is one map lookup and an integer comparison. A
	// topic whose count is too small for a partition (preserve) is checked again.
	ready map[string]int32

	// rec and outs are reused for every record that goes through the handler chain,
	// pending for the messages of the record being sent.
	rec     handler.Record
	outs    []*handler.Record
	pending []*outMsg
	// free is the claim's own cache of outMsgs to reuse, filled from and given back
	// to the sender's outFreeList a batch at a time.
	free []*outMsg
	// via is the producer this claim sent its last record through (see sender.admit).
	via route
	// pool is the batching producer of this claim's records (sender.poolIndex).
	pool int

	// sendCtx bounds handing a record to the producer: it ends the drain limit after
	// the session ended (sessionState.drain), so a record read before the end still
	// reaches the producer during the drain, and a target that hangs cannot hold the
	// claim past it.
	sendCtx context.Context
	// unsent is 1 once a record was Added to the tracker but not (wholly) handed to the
	// producer before sendCtx ended: it stays un-acked, holding the commit point at its
	// offset, and the drain waits only for the records the producer has.
	unsent int
	// confirmed is the last offset the group coordinator confirmed committing for this
	// claim, -1 before the first. A commit point above it is sent on every commit.
	confirmed int64
	// readAt is when readLoop took the current record, read once per burst of records
	// already waiting in the consumer's buffer (see readLoop); clockReuse counts down
	// the records that may still share it.
	readAt     time.Time
	clockReuse int
}

// inFlightResumeShare is hysteresis for the per-partition in-flight bound: a claim held
// at maxInFlightPerPartition resumes once this share of it (an eighth) was acked,
// rather than after every single ack, which woke the claim's goroutine once per record
// whenever the producer was the bottleneck. The bound itself is unchanged.
const inFlightResumeShare = 8

// readClockReuse bounds how many records in a row share one reading of the clock while
// the consumer's buffer holds records (see readLoop).
const readClockReuse = 32

// startClaim registers a claim of the current session with a tracker of trackerSize
// and attaches it to its partition's state; the caller detaches it when the claim ends.
func (s *stream) startClaim(claim sarama.ConsumerGroupClaim, trackerSize int) (*claimState, *sessionState) {
	e := s.e
	s.mu.Lock()
	ss := s.cur
	s.mu.Unlock()
	part := e.parts.get(claim.Topic(), claim.Partition())
	c := &claimState{
		e:         e,
		s:         e.sender,
		part:      part,
		tracker:   offsets.New(trackerSize),
		topic:     claim.Topic(),
		topicID:   ss.ids[claim.Topic()],
		target:    e.sel.TargetName(claim.Topic()),
		confirmed: -1,
		sendCtx:   ss.drain,
		pool:      e.sender.poolIndex(claim.Topic(), claim.Partition()),
	}
	ss.mu.Lock()
	ss.claims = append(ss.claims, c)
	ss.mu.Unlock()
	part.attach(c.tracker, claim, c.topicID)
	return c, ss
}

// ConsumeClaim mirrors one partition for the session, then drains it: it stops reading,
// waits until every record it sent was acked, and commits, so that the next owner
// starts exactly where this one stopped and a clean rebalance or shutdown mirrors
// nothing twice. Every wait of the claim honours the session's context, and the drain
// ends the drain limit after the session ended (inside the rebalance timeout) however
// long the claim took to notice, so a target that hangs holds neither a stop nor the
// group's rebalance longer than that.
func (s *stream) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	e := s.e
	if e.txn != nil {
		return s.consumeClaimTxn(sess, claim)
	}
	c, ss := s.startClaim(claim, min(e.cfg.MaxInFlightPerPartition, 1<<16))
	defer c.part.detach()

	err := c.readLoop(sess.Context(), claim)
	c.releaseFree()
	if e.aborted.Load() {
		return nil
	}
	if err != nil && !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		e.fail(err)
	}
	if !e.isFailed() {
		// A fatal error during the drain ends it (ss.drain): nothing more will be
		// committed past the failure, and the stop must not wait for a target that
		// cannot deliver.
		drain := ss.drain
		if sess.Context().Err() == nil {
			// The claim ended by itself (its partition consumer stopped): the session
			// ends because this ConsumeClaim returns, so its drain starts now.
			var cancel context.CancelFunc
			drain, cancel = context.WithTimeout(ss.drain, e.life.drainLimit)
			defer cancel()
		}
		// A record that was never handed to the producer (c.unsent) is never acked;
		// the drain waits for the others only.
		if err := c.tracker.WaitBelow(drain, 1+c.unsent); err != nil && !e.isFailed() {
			s.log.Info("Timed out draining a released partition; committing what the target acked",
				"topic", c.topic, "partition", c.part.partition, "inFlight", c.tracker.InFlight(), "drainLimit", e.life.drainLimit)
		}
	}
	// After a fatal error the commit point still stops below the failed record, which is
	// never acked, so committing it is safe and keeps the work already done.
	e.commitSession(ss.final, ss)
	if e.syncs != nil {
		// Nothing more is added: once the records still in flight are acked (at once
		// after a drain that completed, later after one that gave up), the chain's
		// last offset sync says that no copy of this assignment follows.
		e.syncs.assignmentEnded(c.part, c.tracker, c.unsent)
	}
	return nil
}

// readLoop is the read loop of one partition.
func (c *claimState) readLoop(ctx context.Context, claim sarama.ConsumerGroupClaim) error {
	msgs := claim.Messages()
	done := ctx.Done()
	for {
		// The records waiting in the buffer were fetched together, before the first of
		// them is taken: one reading of the clock serves them all (it was 1-2% of the
		// engine's CPU per record). A new burst, or a long one, reads it again.
		if len(msgs) == 0 {
			c.clockReuse = 0
		}
		m, err := c.next(msgs, done)
		if m == nil {
			return err
		}
		if ctx.Err() != nil {
			// When the session ended, stop reading even if more records are ready: m
			// is not Added, the next owner reads it.
			return nil
		}
		if c.clockReuse == 0 {
			c.readAt, c.clockReuse = time.Now(), readClockReuse
		}
		c.clockReuse--
		if err := c.mirrorRecord(ctx, m); err != nil {
			return err
		}
	}
}

// next returns the next record of msgs, or nil and what ends the read loop: nil when
// done or msgs was closed, errStopped when the engine failed. A record
// already waiting is taken without a select over all three channels, which locks
// each of them and was a tenth of the engine's CPU with sarama's own selects: checking
// failed without blocking costs no lock.
func (c *claimState) next(msgs <-chan *sarama.ConsumerMessage, done <-chan struct{}) (*sarama.ConsumerMessage, error) {
	select {
	case <-c.e.failed:
		return nil, errStopped
	default:
	}
	select {
	case m := <-msgs:
		return m, nil // nil when msgs was closed
	default:
	}
	select {
	case m := <-msgs:
		return m, nil
	case <-done:
		return nil, nil
	case <-c.e.failed:
		return nil, errStopped
	}
}

// mirrorRecord takes one source record through the handler chain to the producer. It
// returns an error only for a fatal condition (handler failure) or when ctx ended
// while the record waited (then the record was not Added and its offset not passed).
func (c *claimState) mirrorRecord(ctx context.Context, m *sarama.ConsumerMessage) error {
	limit := c.e.cfg.MaxInFlightPerPartition
	if err := c.tracker.WaitForRoom(ctx, limit, limit-limit/inFlightResumeShare); err != nil {
		return err
	}
	now := c.readAt
	// The provenance is judged on the record as read, before the handler chain, and
	// stamped on every record the chain leaves.
	pv := c.e.provenance
	var stamp []byte
	if pv != nil {
		var why dropReason
		if stamp, why = pv.check(m.Headers); why != dropNone {
			c.part.dropped(why)
			c.tracker.Add(m.Offset, 0)
			return nil
		}
	}
	if c.e.passThrough {
		if err := c.awaitTarget(ctx, c.target, m.Partition); err != nil {
			return err
		}
		o := c.getOut()
		o.msg.Topic = c.target
		o.msg.Partition = m.Partition
		o.msg.Timestamp = m.Timestamp
		o.setKeyValue(m.Key, m.Value)
		for _, h := range m.Headers {
			if pv == nil || !pv.isHeader(h.Key) {
				o.headers = append(o.headers, *h)
			}
		}
		if stamp != nil {
			o.headers = append(o.headers, pv.stampHeader(stamp))
		}
		o.msg.Headers = o.headers
		c.fill(o, m, now)
		c.pending = append(c.pending[:0], o)
		if err := c.s.admit(ctx, c, c.pending); err != nil {
			c.putOut(o)
			return err
		}
		o.ticket = c.tracker.Add(m.Offset, 1)
		if !c.s.send(c.sendCtx, o) {
			c.s.release(o)
			return c.notSent(o)
		}
		return nil
	}
	return c.mirrorThroughChain(ctx, m, now, stamp)
}

// getOut returns an outMsg to fill: from the claim's cache, refilled from the sender's
// free list, or a new one while the engine warms up.
func (c *claimState) getOut() *outMsg {
	if len(c.free) == 0 {
		if c.free = c.s.free.take(c.free); len(c.free) == 0 {
			return new(outMsg)
		}
	}
	o := c.free[len(c.free)-1]
	c.free[len(c.free)-1] = nil
	c.free = c.free[:len(c.free)-1]
	return o
}

// putOut takes back an outMsg that was never handed to the producer.
func (c *claimState) putOut(o *outMsg) {
	o.reset()
	c.free = append(c.free, o)
}

// releaseFree gives the claim's cache back to the sender's free list when the claim ends.
func (c *claimState) releaseFree() {
	c.s.free.give(c.free)
	clear(c.free)
	c.free = nil
}

// errStopped ends a claim because the engine failed or was aborted.
var errStopped = fmt.Errorf("the engine stopped")

// notSent ends the claim after send gave up on o: the record stays un-acked (its
// offset is never committed) and is counted so the drain does not wait for it.
func (c *claimState) notSent(o *outMsg) error {
	c.unsent = 1
	c.part.setUnsent(c.unsent)
	c.putOut(o)
	if c.e.isFailed() {
		return errStopped
	}
	return c.sendCtx.Err()
}

func (c *claimState) fill(o *outMsg, m *sarama.ConsumerMessage, now time.Time) {
	o.part = c.part
	o.tracker = c.tracker
	o.sourceOffset = m.Offset
	o.sourceTime = m.Timestamp
	o.readAt = now
}

// mirrorThroughChain is mirrorRecord with a handler chain; stamp is the provenance
// header's value for every output, nil for none.
func (c *claimState) mirrorThroughChain(ctx context.Context, m *sarama.ConsumerMessage, now time.Time, stamp []byte) error {
	r := &c.rec
	hs := r.Headers[:0]
	for _, h := range m.Headers {
		hs = append(hs, handler.Header{Key: headerKeyString(h.Key), Value: h.Value})
	}
	*r = handler.Record{
		Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp,
		Key: m.Key, Value: m.Value, Headers: hs,
	}
	outs, err := c.e.chain.Handle(ctx, r, c.outs[:0])
	defer func() {
		clear(outs)
		c.outs = outs[:0]
	}()
	switch {
	case err != nil && handlerSkipped(err):
		c.part.skipped.Add(1)
		c.tracker.Add(m.Offset, 0)
		return nil
	case err != nil:
		return fmt.Errorf("while handling source record %s/%d offset %d: %w", m.Topic, m.Partition, m.Offset, err)
	case len(outs) == 0:
		c.part.filtered.Add(1)
		c.tracker.Add(m.Offset, 0)
		return nil
	}
	// Every output's target must be ready before any is sent, so that a record is either
	// wholly in flight or not started when ctx ends.
	for _, out := range outs {
		if err := c.awaitTarget(ctx, c.targetName(out.Topic), out.Partition); err != nil {
			return err
		}
	}
	// Every output is built and admitted (producer chosen, bytes taken) before the
	// record is added to the tracker, so that a record is either wholly in flight or not
	// started.
	pending := c.pending[:0]
	for _, out := range outs {
		o := c.getOut()
		o.msg.Topic = c.targetName(out.Topic)
		o.msg.Partition = out.Partition
		o.msg.Timestamp = out.Timestamp
		o.setKeyValue(out.Key, out.Value)
		pv := c.e.provenance
		for _, h := range out.Headers {
			if pv == nil || h.Key != pv.name {
				o.headers = append(o.headers, sarama.RecordHeader{Key: headerKeyBytes(h.Key), Value: h.Value})
			}
		}
		if stamp != nil {
			o.headers = append(o.headers, pv.stampHeader(stamp))
		}
		o.msg.Headers = o.headers
		c.fill(o, m, now)
		pending = append(pending, o)
	}
	c.pending = pending
	defer clear(c.pending)
	if err := c.s.admit(ctx, c, pending); err != nil {
		for _, o := range pending {
			c.putOut(o)
		}
		return err
	}
	tk := c.tracker.Add(m.Offset, len(pending))
	for i, o := range pending {
		o.ticket = tk
		if !c.s.send(c.sendCtx, o) {
			// The outputs not sent give their bytes back; the record stays un-acked,
			// so no commit passes it.
			for _, rest := range pending[i:] {
				c.s.release(rest)
			}
			for _, rest := range pending[i+1:] {
				c.putOut(rest)
			}
			return c.notSent(o)
		}
	}
	return nil
}

// targetName renames a topic the chain left; the claim's own topic is renamed once.
func (c *claimState) targetName(topic string) string {
	if topic == c.topic {
		return c.target
	}
	return c.e.sel.TargetName(topic)
}

// awaitTarget returns once topic can take records from this claim. The fast path is
// the claim's cache of target topics found ready (one map lookup, so a handler that
// routes records to several topics pays no check per record); otherwise it asks the
// target and, while the topic is missing or too small, waits with backoff (this
// partition only: the others go on), logs once and sets the partition's waiting gauge.
// It returns ctx's error when ctx ends first.
func (c *claimState) awaitTarget(ctx context.Context, topic string, partition int32) error {
	if c.knownReady(topic, partition) {
		return nil
	}
	retry := newBackoff(targetWaitMin, targetWaitMax)
	for attempt := 0; ; attempt++ {
		n, err := c.s.targets.check(ctx, topic, partition, attempt > 0)
		if err == nil {
			if c.ready == nil {
				c.ready = make(map[string]int32)
			}
			c.ready[topic] = n
			if attempt > 0 {
				c.part.waiting.Store(0)
				c.e.log.Info("Resumed partition: its target topic is ready", "topic", c.topic, "partition", c.part.partition,
					"targetTopic", topic, "targetPartitions", n)
			}
			return nil
		}
		if attempt == 0 {
			c.part.waiting.Store(1)
			c.e.log.Info("Paused partition until its target topic is ready", "topic", c.topic, "partition", c.part.partition,
				"targetTopic", topic, "reason", err.Error())
		}
		select {
		case <-ctx.Done():
			c.part.waiting.Store(0)
			return ctx.Err()
		case <-c.e.failed:
			c.part.waiting.Store(0)
			return errStopped
		case <-time.After(retry.next()):
		}
	}
}

// knownReady reports whether the claim already found topic ready for partition, so
// that awaitTarget returns at once.
func (c *claimState) knownReady(topic string, partition int32) bool {
	n, ok := c.ready[topic]
	return ok && (!c.s.preserve || partition < n)
}

func handlerSkipped(err error) bool { return handler.IsSkip(err) }

// emptyHeaderKey keeps an empty header key empty rather than null: sarama encodes a nil
// key as null, which the source never sent.
var emptyHeaderKey = []byte{}

// headerKeyString views a source header key as a string without copying it. Header keys
// were two allocations per header per record when a handler ran (39% of all objects the
// engine allocated under a CEL filter, docs/performance.md). It is safe because nothing
// writes to a fetched record's bytes: sarama decodes them once and the engine and the
// handlers only read them.
func headerKeyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// headerKeyBytes views a handler's header key as bytes without copying it, for the
// producer, which only reads (encodes) them.
func headerKeyBytes(s string) []byte {
	if s == "" {
		return emptyHeaderKey
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
