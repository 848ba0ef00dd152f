// Package topics decides which source topics are mirrored and under which target names,
// and keeps the target cluster's topics in step with the source: missing topics are
// created with the source's partition count, topics whose source grew are expanded, and
// targets with more partitions than their source are reported, never changed (Kafka
// cannot shrink a topic). Created targets get the source's replication factor, capped at
// the target's broker count, and the configs set on the source topic are copied (minus
// an exclude list) at creation and whenever they change; configs the target refuses are
// reported and left out, never a reason not to mirror.
//
// Config changes use IncrementalAlterConfigs (Kafka 2.3+), which sets only the named
// configs; the older AlterConfigs replaces a topic's whole config set and would drop the
// configs set only on the target.
//
// The same code serves the engine (`kafka-mirror run` with syncTopics: true) and the
// operator's reconcile step, so both make the same decisions. Lag reads a consumer
// group's progress for status and the demo.
package topics
