// Package mirror is the mirror engine: it reads records from the source cluster through
// `streams` consumer-group members, runs them through the handler chain, writes them to
// the target cluster through a few shared idempotent producers (each source partition
// through one of them), and commits a source offset only when the target acknowledged
// every record at or below it.
//
// The pieces, each in its own file, one type per role:
//   - engine.go: Engine, New and Run, the outline of everything Run starts, and the
//     engine's fatal error (fail, Abort, Ready);
//   - lifecycle.go: lifecycle, the connection to both clusters with retry and the
//     deadlines that bound the stop (the drain limit, closeDeadline, waitUntil);
//   - stream.go: one consumer-group member and its sarama handler (Setup, Cleanup) and
//     the session's commits;
//   - claim.go: a record's path through one claim (ConsumeClaim, the read loop, the
//     handler chain, the wait for its target topic), including the drain before a
//     partition is released;
//   - sender.go: sender, the pool of batching producers and the single-record one, their acks (and a
//     send that finally failed into the engine's error), the outMsg pool; with
//     limits.go (the size limits that route records between the two producers) and
//     budget.go (the in-flight byte budget);
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
