package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// outMsg is one record on its way to the target: the producer message and what the
// ack needs to find its source offset. It is pooled, and the message's Metadata points
// back to it, so a record costs no allocation beyond the pooled message once the pool
// is warm. Key and value encoders live here so that setting them allocates nothing.
type outMsg struct {
	msg     sarama.ProducerMessage
	key     sarama.ByteEncoder
	value   sarama.ByteEncoder
	headers []sarama.RecordHeader

	part    *partitionState
	tracker *offsets.Tracker
	ticket  offsets.Ticket
	// sourceOffset is kept for the error message of a failed send.
	sourceOffset int64
	sourceTime   time.Time
	readAt       time.Time
	size         int64
	// via is the producer that sends it; budgeted is what it took from the byte budget
	// (see Engine.admit).
	via      route
	budgeted int64
}

func (e *Engine) getOut() *outMsg {
	return e.outPool.Get().(*outMsg)
}

// putOut returns o to the pool, dropping references to record bytes.
func (e *Engine) putOut(o *outMsg) {
	clear(o.headers)
	*o = outMsg{headers: o.headers[:0]}
	e.outPool.Put(o)
}

// setKeyValue sets the message's key and value, keeping null (nil) apart from empty.
func (o *outMsg) setKeyValue(key, value []byte) {
	o.msg.Key, o.msg.Value = nil, nil
	if key != nil {
		o.key = key
		o.msg.Key = &o.key
	}
	if value != nil {
		o.value = value
		o.msg.Value = &o.value
	}
	o.size = int64(len(key) + len(value))
}

// send hands o to the producer. It waits while the producer's input is full (the
// target is slower than the source, or hangs) but gives up when ctx ends (the drain
// of the claim's session ended: claimState.sendCtx) or the engine fails or is aborted. A record
// not handed over stays un-acked in its tracker, so its offset is never committed and
// the partition's next owner reads it again; the caller counts it (claimState.unsent)
// so the drain does not wait for it.
func (e *Engine) send(ctx context.Context, o *outMsg) bool {
	o.msg.Metadata = o
	in := e.producer.Input()
	if o.via == routeSingle {
		in = e.single.Input()
	}
	select {
	case in <- &o.msg:
		return true
	case <-ctx.Done():
		return false
	case <-e.failed:
		return false
	}
}

// readAcks turns producer results into tracker acks until the producer is closed.
func (e *Engine) readAcks(producer sarama.AsyncProducer) {
	succ, errs := producer.Successes(), producer.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			e.acked(m.Metadata.(*outMsg))
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			e.sendFailed(pe)
		}
	}
}

func (e *Engine) acked(o *outMsg) {
	now := time.Now()
	p := o.part
	p.records.Add(1)
	p.bytes.Add(o.size)
	p.latency.Observe(now.Sub(o.readAt).Seconds())
	if !o.sourceTime.IsZero() {
		p.age.Observe(max(now.Sub(o.sourceTime).Seconds(), 0))
	}
	o.tracker.Ack(o.ticket)
	e.budget.release(o.budgeted)
	e.putOut(o)
}

// sendFailed stops the engine: the record stays un-acked, so no commit passes it, and
// the restarted engine sends it again.
//
// The producer hands a record back only when no retry can help (the target refused it
// for good, for example as too large or not authorised) or after retrying it for at
// least deliveryTimeout (kafka.ProducerConfig: produce retries and leader lookups both
// back off for that long, in order). A refusal is not retried by the engine: sarama's
// idempotent producer bumps its epoch after it and goes on with the batches already
// queued behind it, so later records of the same partition may reach the target before
// the engine stops. Nothing is lost, but after the restart those records are on the
// target twice, the first copies before the refused record.
//
// A batch of several records refused as too large is the engine's problem, not the
// records': it is never fatal, its records are sent again one by one (resendAlone).
func (e *Engine) sendFailed(pe *sarama.ProducerError) {
	if o, ok := pe.Msg.Metadata.(*outMsg); ok && o.via == routeBatch && errors.Is(pe.Err, sarama.ErrMessageSizeTooLarge) && !e.isFailed() {
		e.resendAlone(o)
		return
	}
	e.sendErrors.Add(1)
	e.metrics.sendErrors.Inc()
	o, ok := pe.Msg.Metadata.(*outMsg)
	if !ok {
		e.fail(fmt.Errorf("while writing to target topic %q partition %d: %w", pe.Msg.Topic, pe.Msg.Partition, pe.Err))
		return
	}
	e.budget.release(o.budgeted)
	if errors.Is(pe.Err, sarama.ErrMessageSizeTooLarge) {
		limit, _ := e.limits.limit(pe.Msg.Topic)
		e.fail(fmt.Errorf("while writing source record %s/%d offset %d to target topic %q partition %d: the target refused a record batch of this record alone "+
			"(%d bytes at most; limit known to the engine %d, 0 when unknown): %w",
			o.part.topic, o.part.partition, o.sourceOffset, pe.Msg.Topic, pe.Msg.Partition, pe.Msg.ByteSize(2)+recordBatchOverhead, limit, pe.Err))
		return
	}
	e.fail(fmt.Errorf("while writing source record %s/%d offset %d to target topic %q partition %d (read %v ago): %w",
		o.part.topic, o.part.partition, o.sourceOffset, pe.Msg.Topic, pe.Msg.Partition, time.Since(o.readAt).Round(time.Millisecond), pe.Err))
}
