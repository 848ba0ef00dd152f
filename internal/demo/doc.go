// Package demo is the quick start behind `kafka-mirror demo` (and `make demo`): it shows
// the mirror's main job and its no-data-loss promise on two embedded Kafka clusters, with
// nothing to install.
//
// The scenario, in order: start a source and a target cluster (kfake, in-process, on
// loopback ports); create source topics with different partition counts; sync them to the
// target with the same topic-sync code the operator runs; start the engine as a child
// process (`kafka-mirror run --config`) with a CEL filter; produce a keyed workload with
// headers at a steady rate while a progress view shows throughput, lag, in-flight records
// and commits; expand a source topic and watch the target follow; kill the engine with
// SIGKILL part-way and restart it; stop it cleanly at the end; and audit the target
// against every record the source acknowledged.
//
// The engine runs as a separate process so that the abrupt stop is a real kill -9: no
// deferred code, no drain, no final commit, in-flight records dropped from memory. What
// survives is exactly what survives a crashed pod, which is what the promise is about.
package demo
