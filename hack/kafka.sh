#!/usr/bin/env bash
# Fetches the jars of a real Apache Kafka broker (the artifacts hack/kafka/pom.xml lists, with
# their runtime dependencies) from Maven Central through Maven, and caches them outside the
# repository keyed by the Kafka version, so that only the first run on a machine pays for the
# download (about 55 MB). No tarballs: the broker runs as `java -cp '<dir>/*' kafka.Kafka`.
#
# Prints the directory holding the jars: the real-Kafka tests read it from KAFKA_JARS.
#
# `hack/kafka.sh mm2` (what hack/kafka-mm2.sh runs) does the same for Apache MirrorMaker 2
# (hack/kafka/mm2/pom.xml, cached under mm2/<version>), which `make bench KAFKA=real` runs as
# `java -cp '<dir>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties` and reads
# from MM2_JARS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${KAFKA_MIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-mirror}

# The artifact: what its messages call it (also its cache directory), its pom and the pom
# property holding its version, its full name, and the make target that fetches it.
case "${1:-kafka}" in
kafka) label=kafka pom="$here/kafka/pom.xml" property=kafka.version name="Apache Kafka" target=kafka ;;
mm2) label=mm2 pom="$here/kafka/mm2/pom.xml" property=mm2.version name="Apache MirrorMaker 2" target=kafka-mm2 ;;
*)
  echo "usage: $0 [kafka|mm2]" >&2
  exit 2
  ;;
esac
version=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$pom")
dir="$cache/$label/$version"

# .complete is written last, so an interrupted download is never taken for a finished one.
if [ ! -f "$dir/.complete" ]; then
  if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "$label: needs Maven (mvn) and a JDK 17 or newer (java) on the PATH" >&2
    exit 1
  fi
  echo "$label: fetching $name $version with Maven (first run on this machine; cached in $dir)" >&2
  start=$SECONDS
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  # Debian's Maven prints colour resets even in batch mode: strip them (pipefail keeps
  # Maven's exit status).
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir.tmp" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2; then
    echo "$label: Maven could not fetch the jars; check that Maven Central is reachable and retry 'make $target'" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "$label: fetched $(ls "$dir"/*.jar | wc -l) jars in $((SECONDS - start))s" >&2
fi
echo "$dir"
