// Package e2e is the fault-injection and loss-audit suite: it runs the kafka-mirror
// engine as a separate OS process between two in-process kfake clusters, each behind
// toxiproxy, injects one fault per test (kill -9, SIGTERM, scaling, outages, lost acks,
// partition expansion, transactions, slow target, bad credentials) and proves with
// internal/audit that every record the source acknowledged reached the target.
// TestAutoscaleOnLag also runs the operator on envtest, with the engines as its pods.
//
// The tests carry the build tag e2e and need the engine binary: `make e2e` builds
// bin/kafka-mirror and sets KAFKA_MIRROR_BIN. docs/reliability.md lists the faults, what
// each test asserts and the figures of the last run.
package e2e
