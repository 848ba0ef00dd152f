package mirror

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// recordBatchOverhead is the header of a v2 record batch, log overhead included: a
// broker measures header and records together against max.message.bytes.
const recordBatchOverhead = 61

// maxProducibleBytes is the largest record batch the engine sends: sarama cannot send a
// request larger than sarama.MaxRequestSize.
const maxProducibleBytes = config.MaxMaxMessageBytes

// sizeLimits routes records between the engine's two kinds of producer so that no batch is
// ever larger than its target topic accepts, and refuses, before sending, a record that
// no batch could carry.
//
// sarama's Producer.MaxMessageBytes caps both one record and each partition's batch,
// for every topic of the producer at once, and sarama never splits a batch the broker
// refuses as too large (MESSAGE_TOO_LARGE is final). So:
//
//   - The batching producers (sender.producers, a pool: each claim uses one of them,
//     sender.poolIndex) are made once, after the first topic sync, with
//     MaxMessageBytes = the smallest limit of the mirrored target topics minus the
//     batch header (batchCap). Their batches therefore fit every topic known then.
//   - The single-record producer (sender.single) sends one record per request
//     (Flush.MaxMessages = 1), so its batches are exactly one record. It carries the
//     records larger than batchCap that their own topic accepts (a 2 MB record to a
//     topic allowing 5 MB while another topic allows 64 KB), and every record to a topic
//     whose limit is unknown or fell below batchCap after the producer was made (a
//     topic created later with a small limit), until a restart sizes the batching
//     producer again. Correct, only slower.
//   - A record whose own batch exceeds its topic's limit is a fatal error naming it,
//     raised before sending (the broker's refusal would say less).
//   - A batch the target refuses all the same (its limit was lowered while mirroring)
//     is not fatal: its records are sent again alone (sender.resendAlone).
//
// A partition's records go through one producer at a time (its claim's batching
// producer or the single-record one): the claim waits until everything it sent
// through one has been acked before it sends through the other, so
// order within the partition is kept. The only exception is resendAlone's.
//
// Sizes are measured uncompressed (sarama's ProducerMessage.ByteSize, an upper bound of
// the record's encoding); the engine does not compress, and a compression setting would
// have to keep batches within the limit after compression too.
//
// Limits come from the target (topics.ReadMessageLimits), read by the topic loop at
// start and every topicSyncInterval, or from producer.maxMessageBytes for every topic.
type sizeLimits struct {
	override int
	// batchCap is the batching producer's MaxMessageBytes; 0 until it is made.
	batchCap int
	known    atomic.Pointer[topics.MessageLimits]
	// unknown collects target topics a record went to without a known limit (a handler
	// may choose any topic), so that the next topic loop describes them.
	unknown sync.Map
	// distrusted holds target topics that refused a batch the engine thought fit: their
	// limit fell after it was read. Their records go one at a time until it is read again.
	distrusted sync.Map
}

// set stores freshly read limits.
func (l *sizeLimits) set(m topics.MessageLimits) { l.known.Store(&m) }

// limit returns the target topic's max.message.bytes (capped at what sarama can send)
// and whether it is known.
func (l *sizeLimits) limit(topic string) (int, bool) {
	// A topic that refused a batch the engine thought fit is not trusted, whatever the
	// override says, until its limit is read again.
	if _, ok := l.distrusted.Load(topic); ok {
		l.unknown.Store(topic, struct{}{})
		return 0, false
	}
	if l.override > 0 {
		return min(l.override, maxProducibleBytes), true
	}
	if m := l.known.Load(); m != nil {
		if n, ok := m.Topics[topic]; ok {
			return min(n, maxProducibleBytes), true
		}
	}
	l.unknown.Store(topic, struct{}{})
	return 0, false
}

// topicsToDescribe returns targets plus every topic a record went to without a known
// limit.
func (l *sizeLimits) topicsToDescribe(targets []string) []string {
	seen := make(map[string]bool, len(targets))
	out := append([]string(nil), targets...)
	for _, t := range targets {
		seen[t] = true
	}
	l.unknown.Range(func(k, _ any) bool {
		if t := k.(string); !seen[t] {
			out = append(out, t)
		}
		return true
	})
	return out
}

// capForBatches returns the batching producer's MaxMessageBytes for the limits known
// now: the smallest limit among the mirrored target topics (or the broker's when there
// is none) minus the batch header.
func (l *sizeLimits) capForBatches(targets []string) int {
	smallest := topics.DefaultMaxMessageBytes
	if m := l.known.Load(); m != nil {
		smallest = m.Broker
	}
	found := false
	for _, t := range targets {
		if n, ok := l.limit(t); ok && (!found || n < smallest) {
			smallest, found = n, true
		}
	}
	if l.override > 0 {
		smallest = l.override
	}
	return max(min(smallest, maxProducibleBytes)-recordBatchOverhead, 1)
}

// route says which producer sends a record.
type route int

const (
	routeBatch  route = iota // the batching producer
	routeSingle              // the single-record producer
)

// routeFor chooses o's producer, or returns a recordTooLargeError when o alone is
// larger than its target topic accepts.
//
// size is o.msg.ByteSize(2), which the caller has already computed for the byte budget.
func (l *sizeLimits) routeFor(o *outMsg, size int) (route, error) {
	limit, known := l.limit(o.msg.Topic)
	switch {
	case !known:
		// The broker judges; a refusal of a batch of one record is final (sendFailed).
		return routeSingle, nil
	case size+recordBatchOverhead > limit:
		return routeSingle, &recordTooLargeError{
			sourceTopic: o.part.topic, sourcePartition: o.part.partition, offset: o.sourceOffset,
			targetTopic: o.msg.Topic, size: size + recordBatchOverhead, limit: limit, override: l.override > 0,
		}
	case size <= l.batchCap && limit-recordBatchOverhead >= l.batchCap:
		return routeBatch, nil
	default:
		return routeSingle, nil
	}
}

// recordTooLargeError is the fatal error of a record that no batch can carry.
type recordTooLargeError struct {
	sourceTopic     string
	sourcePartition int32
	offset          int64
	targetTopic     string
	size, limit     int
	override        bool
}

func (e *recordTooLargeError) Error() string {
	what := fmt.Sprintf("target topic %q accepts at most %d bytes (its max.message.bytes)", e.targetTopic, e.limit)
	if e.override {
		what = fmt.Sprintf("producer.maxMessageBytes allows at most %d bytes", e.limit)
	}
	return fmt.Sprintf("while writing source record %s/%d offset %d to target topic %q: the record needs a %d-byte record batch and %s; "+
		"raise the target topic's max.message.bytes (or drop or shrink the record with a handler)",
		e.sourceTopic, e.sourcePartition, e.offset, e.targetTopic, e.size, what)
}
