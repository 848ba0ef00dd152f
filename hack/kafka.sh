#!/usr/bin/env bash
# Fetches the jars of a real Apache Kafka broker (the artifacts hack/kafka/pom.xml lists, with
# their runtime dependencies) from Maven Central through Maven, and caches them outside the
# repository keyed by the Kafka version, so that only the first run on a machine pays for the
# download (about 55 MB). No tarballs: the broker runs as `java -cp '<dir>/*' kafka.Kafka`.
#
# Prints the directory holding the jars: the real-Kafka tests read it from KAFKA_JARS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pom="$here/kafka/pom.xml"
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
cache=${KAFKA_MIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-mirror}
dir="$cache/kafka/$version"

# .complete is written last, so an interrupted download is never taken for a finished one.
if [ ! -f "$dir/.complete" ]; then
  if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "kafka: needs Maven (mvn) and a JDK 17 or newer (java) on the PATH" >&2
    exit 1
  fi
  echo "kafka: fetching Apache Kafka $version with Maven (first run on this machine; cached in $dir)" >&2
  start=$SECONDS
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  # Debian's Maven prints colour resets even in batch mode: strip them (pipefail keeps
  # Maven's exit status).
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir.tmp" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2; then
    echo "kafka: Maven could not fetch the jars; check that Maven Central is reachable and retry 'make kafka'" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "kafka: fetched $(ls "$dir"/*.jar | wc -l) jars in $((SECONDS - start))s" >&2
fi
echo "$dir"
