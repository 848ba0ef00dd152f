// Package engineproc runs the mirror engine (`kafka-mirror run --config ...`) as a child
// OS process, the way a pod runs it: start it with its output in a log file, wait until
// its /readyz answers, stop it with SIGTERM (drain and commit) or SIGKILL (nothing
// survives but what was committed), and read what it left: the exit code, the tail of
// its log, its CPU time and peak RSS.
//
// The demo (internal/demo), the benchmark (hack/bench) and the end-to-end suite
// (test/e2e) share it, so that "stopped cleanly" means the same thing in all three.
package engineproc
