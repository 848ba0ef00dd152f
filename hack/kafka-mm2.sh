#!/usr/bin/env bash
# Fetches the jars of Apache MirrorMaker 2 (the artifacts hack/kafka/mm2/pom.xml lists, with
# their runtime dependencies) from Maven Central through Maven, and caches them outside the
# repository keyed by the MirrorMaker version, as hack/kafka.sh does for the broker. Only
# `make bench KAFKA=real` needs them (not the tests, not .ci/run). No tarballs: MirrorMaker
# runs as `java -cp '<dir>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`.
#
# Prints the directory holding the jars: the benchmark reads it from MM2_JARS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pom="$here/kafka/mm2/pom.xml"
version=$(sed -n 's:.*<mm2.version>\(.*\)</mm2.version>.*:\1:p' "$pom")
cache=${KAFKA_MIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-mirror}
dir="$cache/mm2/$version"

# .complete is written last, so an interrupted download is never taken for a finished one.
if [ ! -f "$dir/.complete" ]; then
  if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "mm2: needs Maven (mvn) and a JDK 17 or newer (java) on the PATH" >&2
    exit 1
  fi
  echo "mm2: fetching Apache MirrorMaker 2 $version with Maven (first run on this machine; cached in $dir)" >&2
  start=$SECONDS
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  # Debian's Maven prints colour resets even in batch mode: strip them (pipefail keeps
  # Maven's exit status).
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir.tmp" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2; then
    echo "mm2: Maven could not fetch the jars; check that Maven Central is reachable and retry 'make kafka-mm2'" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "mm2: fetched $(ls "$dir"/*.jar | wc -l) jars in $((SECONDS - start))s" >&2
fi
echo "$dir"
