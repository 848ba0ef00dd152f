// Package topics decides which source topics are mirrored and under which target names,
// and keeps the target cluster's topics in step with the source: missing topics are
// created with the source's partition count, topics whose source grew are expanded, and
// targets with more partitions than their source are reported, never changed (Kafka
// cannot shrink a topic).
//
// The same code serves the engine (`kafka-mirror run` with syncTopics: true) and the
// operator's reconcile step, so both make the same decisions. Lag reads a consumer
// group's progress for status and the demo.
package topics
