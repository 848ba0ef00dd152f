// Command bench is `make bench`: a reproducible measurement of the mirror engine's
// throughput, replication latency, CPU and memory against the limit of the brokers it
// runs against.
//
// It starts a source and a target kfake cluster in this process, preloads a topic, and
// then, in one run, measures the broker-bound limit (a raw produce into the target with
// the engine's own producer settings, and a raw consume from the source), a bare sarama
// consumer-group forwarder with the engine's producer settings and nothing else (the
// reference of issue 18, forwarder.go), the engine's
// throughput with and without the no-data-loss policy and with a CEL filter, the cost
// of offset syncs and of group checkpoints (issue 13, groups.go), the replication latency at a moderate fixed rate, and the engine's CPU time and peak RSS
// at two record counts and against a throttled target. The engine runs as a child
// process (`kafka-mirror run --config`), so its CPU time and peak RSS come from the
// kernel's rusage and exclude the clusters.
//
// The across-regions section (distance.go, issue 28; alone with --latency-only) runs the
// engine, the bare forwarder and a franz-go forwarder (kgoforwarder.go) through
// toxiproxy latency in front of the target or the source.
//
// With --kafka real (`make bench KAFKA=real`, realkafka.go and mm2.go, issue 27) it runs
// none of that: it starts two single-broker Apache Kafka clusters (internal/realkafka)
// and mirrors the same preloaded topic with the engine, the bare forwarder and
// MirrorMaker 2 in dedicated mode, in alternating rounds, each run audited record by
// record, then kills the engine and MirrorMaker 2 with SIGKILL mid-stream, at-least-once
// and exactly-once, and counts duplicates and losses (docs/benchmarks/mm2.md).
//
// Because the machine is shared and noisy, the numbers that matter are ratios of
// measurements taken in the same run, alternated round by round. Results are printed
// and written to docs/benchmarks/results.json and results.md.
package main
