// Package mirror is the mirror engine: it reads records from the source cluster through
// `streams` consumer-group members, runs them through the handler chain, writes them to
// the target cluster through one shared idempotent producer, and commits a source
// offset only when the target acknowledged every record at or below it.
//
// The pieces, each in its own file:
//   - engine.go: New, Run and the lifetime of everything Run starts;
//   - stream.go: one consumer-group member and its sarama handler (Setup, ConsumeClaim,
//     Cleanup), including the drain before a partition is released;
//   - record.go: the per-record hot path from a source record to a producer message;
//   - producer.go: the shared producer and the goroutine that turns acks into tracker
//     acks (and a send that finally failed into the engine's error);
//   - delivery.go: the deliveryTimeout watch, which stops the engine when a record has
//     waited longer than deliveryTimeout for the target's ack;
//   - commit.go: the commit step, behind a small interface so that an exactly-once
//     implementation (offsets stored in the target's transaction) can replace it;
//   - targets.go: the check that a target topic exists with enough partitions, so that
//     a produce never auto-creates a topic and a partition whose target is missing waits;
//   - topicloop.go: topic sync and re-selection every topicSyncInterval;
//   - metrics.go, health.go, stats.go: Prometheus metrics, /healthz and /readyz, Stats.
//
// The engine never imports controller-runtime: the operator runs it as a separate
// process through `kafka-mirror run`.
package mirror
