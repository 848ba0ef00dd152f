// Package e2ekafka runs the fault suite's promises on real Apache Kafka: the engine as an
// OS process between two KRaft clusters of broker JVMs (internal/realkafka), one fault per
// test (engine kill -9, a partition leader killed mid-stream on the source or the target,
// rolling restarts of the target, exactly-once across a kill -9 with a real transaction
// coordinator, SCRAM-SHA-512 over TLS with exactly the documented ACLs), and
// internal/audit proving that every record the source acknowledged reached the target.
//
// kfake, under test/e2e, is fast and in-process; these tests are what shows that the
// promises hold on the broker users run: its transaction coordinator, replication, leader
// elections and authorizer. The tests carry the build tag kafka and need the engine
// binary and the Kafka jars: `make e2e-kafka` (all of them) and `make e2e-kafka-smoke`
// (the TestSmoke* subset on single-broker clusters, which .ci/run runs) build
// bin/kafka-mirror, fetch the jars once (`make kafka`) and set KAFKA_MIRROR_BIN and
// KAFKA_JARS. docs/reliability.md has the figures of the last run.
package e2ekafka
