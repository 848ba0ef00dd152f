package mirror

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// claimState is what one ConsumeClaim keeps between records. Only its goroutine uses
// it, so nothing here needs a lock.
type claimState struct {
	part    *partitionState
	tracker *offsets.Tracker
	topic   string
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
	// via is the producer this claim sent its last record through (see sender.admit).
	via route

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
}

// mirrorRecord takes one source record through the handler chain to the producer. It
// returns an error only for a fatal condition (handler failure) or when ctx ended
// while the record waited (then the record was not Added and its offset not passed).
func (e *Engine) mirrorRecord(ctx context.Context, c *claimState, m *sarama.ConsumerMessage) error {
	if err := c.tracker.WaitBelow(ctx, e.cfg.MaxInFlightPerPartition); err != nil {
		return err
	}
	now := time.Now()
	if e.passThrough {
		if err := e.awaitTarget(ctx, c, c.target, m.Partition); err != nil {
			return err
		}
		o := e.sender.getOut()
		o.msg.Topic = c.target
		o.msg.Partition = m.Partition
		o.msg.Timestamp = m.Timestamp
		o.setKeyValue(m.Key, m.Value)
		for _, h := range m.Headers {
			o.headers = append(o.headers, *h)
		}
		o.msg.Headers = o.headers
		e.fill(o, c, m, now)
		c.pending = append(c.pending[:0], o)
		if err := e.sender.admit(ctx, c, c.pending); err != nil {
			e.sender.putOut(o)
			return err
		}
		o.ticket = c.tracker.Add(m.Offset, 1)
		if !e.sender.send(c.sendCtx, o) {
			e.sender.budget.release(o.budgeted)
			return e.notSent(c, o)
		}
		return nil
	}
	return e.mirrorThroughChain(ctx, c, m, now)
}

// errStopped ends a claim because the engine failed or was aborted.
var errStopped = fmt.Errorf("the engine stopped")

// notSent ends the claim after send gave up on o: the record stays un-acked (its
// offset is never committed) and is counted so the drain does not wait for it.
func (e *Engine) notSent(c *claimState, o *outMsg) error {
	c.unsent = 1
	c.part.setUnsent(c.unsent)
	e.sender.putOut(o)
	if e.isFailed() {
		return errStopped
	}
	return c.sendCtx.Err()
}

func (e *Engine) fill(o *outMsg, c *claimState, m *sarama.ConsumerMessage, now time.Time) {
	o.part = c.part
	o.tracker = c.tracker
	o.sourceOffset = m.Offset
	o.sourceTime = m.Timestamp
	o.readAt = now
}

func (e *Engine) mirrorThroughChain(ctx context.Context, c *claimState, m *sarama.ConsumerMessage, now time.Time) error {
	r := &c.rec
	hs := r.Headers[:0]
	for _, h := range m.Headers {
		hs = append(hs, handler.Header{Key: headerKeyString(h.Key), Value: h.Value})
	}
	*r = handler.Record{
		Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp,
		Key: m.Key, Value: m.Value, Headers: hs,
	}
	outs, err := e.chain.Handle(ctx, r, c.outs[:0])
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
		if err := e.awaitTarget(ctx, c, e.targetName(c, out.Topic), out.Partition); err != nil {
			return err
		}
	}
	// Every output is built and admitted (producer chosen, bytes taken) before the
	// record is added to the tracker, so that a record is either wholly in flight or not
	// started.
	pending := c.pending[:0]
	for _, out := range outs {
		o := e.sender.getOut()
		o.msg.Topic = e.targetName(c, out.Topic)
		o.msg.Partition = out.Partition
		o.msg.Timestamp = out.Timestamp
		o.setKeyValue(out.Key, out.Value)
		for _, h := range out.Headers {
			o.headers = append(o.headers, sarama.RecordHeader{Key: headerKeyBytes(h.Key), Value: h.Value})
		}
		o.msg.Headers = o.headers
		e.fill(o, c, m, now)
		pending = append(pending, o)
	}
	c.pending = pending
	defer clear(c.pending)
	if err := e.sender.admit(ctx, c, pending); err != nil {
		for _, o := range pending {
			e.sender.putOut(o)
		}
		return err
	}
	tk := c.tracker.Add(m.Offset, len(pending))
	for i, o := range pending {
		o.ticket = tk
		if !e.sender.send(c.sendCtx, o) {
			// The outputs not sent give their bytes back; the record stays un-acked,
			// so no commit passes it.
			for _, rest := range pending[i:] {
				e.sender.budget.release(rest.budgeted)
			}
			for _, rest := range pending[i+1:] {
				e.sender.putOut(rest)
			}
			return e.notSent(c, o)
		}
	}
	return nil
}

// targetName renames a topic the chain left; the claim's own topic is renamed once.
func (e *Engine) targetName(c *claimState, topic string) string {
	if topic == c.topic {
		return c.target
	}
	return e.sel.TargetName(topic)
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
