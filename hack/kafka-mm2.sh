#!/usr/bin/env bash
# Fetches (once, cached) the jars of Apache MirrorMaker 2 that `make bench KAFKA=real` runs,
# and prints their directory (the benchmark reads it from MM2_JARS): hack/kafka.sh for the
# artifact mm2 (hack/kafka/mm2/pom.xml). Not needed by the tests or .ci/run.
set -euo pipefail
exec bash "$(cd "$(dirname "$0")" && pwd)/kafka.sh" mm2
