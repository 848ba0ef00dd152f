// Package e2eharness is the process harness the two end-to-end suites share: test/e2e
// (kfake clusters behind proxies, `-tags e2e`) and test/e2ekafka (real Apache Kafka,
// `-tags kafka`). It runs the built kafka-mirror binary as a child process
// (internal/engineproc) with a config rendered the way the operator renders it, reads
// the engine's JSON log, produces the audited workload in the background, and checks and
// prints the audit's figures, so that both suites judge a run by the same rules.
//
// It fails the calling test on errors (it takes a *testing.T) and is imported only by
// tests.
package e2eharness
