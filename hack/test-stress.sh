#!/usr/bin/env bash
# Runs the test suite several times while busy loops occupy every core, as a shared CI
# machine or a noisy laptop would, and prints pass/fail per run. A test that fails here
# one run in three would block every later landing: fix it before merging.
#
# Usage: hack/test-stress.sh [RUNS] [PACKAGES...]
#   RUNS      how many runs (default 3)
#   PACKAGES  go test package patterns (default ./...)
# Environment: KUBEBUILDER_ASSETS and HELM as `make test` sets them; TEST_TIMEOUT
# (default 30m) per run; STRESS_LOOPS busy loops (default: one per core).
set -uo pipefail

runs=${1:-3}
shift || true
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
loops=${STRESS_LOOPS:-$(nproc)}
logdir=$(mktemp -d "${TMPDIR:-/tmp}/kafka-mirror-stress.XXXXXX")

busy=()
stop_busy() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null; done
  wait "${busy[@]}" 2>/dev/null
  busy=()
}
trap stop_busy EXIT INT TERM
for _ in $(seq "$loops"); do
  (while :; do :; done) &
  busy+=("$!")
done
echo "stress: $loops busy loops on $(nproc) cores; $runs runs of go test ${pkgs[*]}; logs in $logdir"

passed=0 failed=0
for run in $(seq "$runs"); do
  start=$SECONDS
  log="$logdir/run-$run.log"
  if go test -count=1 -timeout "${TEST_TIMEOUT:-30m}" "${pkgs[@]}" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "stress: run $run/$runs passed in $((SECONDS - start))s"
  else
    failed=$((failed + 1))
    echo "stress: run $run/$runs FAILED in $((SECONDS - start))s (log: $log); failures:"
    grep -E '^(--- FAIL|FAIL|panic:)|_test.go:[0-9]+:' "$log" | head -40 | sed 's/^/    /'
  fi
done
stop_busy
echo "stress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
