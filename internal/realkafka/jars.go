package realkafka

import (
	"fmt"
	"os"
	"path/filepath"
)

// Version is the Apache Kafka version hack/kafka/pom.xml fetches.
const Version = "4.4.0"

// JarsEnv is the environment variable naming the directory of the broker's jars; the
// make targets set it to what hack/kafka.sh prints.
const JarsEnv = "KAFKA_JARS"

// Jars returns the directory holding the broker's jars: $KAFKA_JARS when set, otherwise
// the cache hack/kafka.sh fills ($KAFKA_MIRROR_CACHE, $XDG_CACHE_HOME/kafka-mirror or
// ~/.cache/kafka-mirror, then kafka/<Version>). The error says how to get them.
func Jars() (string, error) {
	return CachedJars(JarsEnv, "kafka", Version, "kafka_2.13-*.jar",
		"the Apache Kafka jars", "run `make kafka` (hack/kafka.sh fetches them from Maven Central once, needs mvn and java) and set "+JarsEnv+" to the directory it prints, or run the tests through `make e2e-kafka`")
}

// CachedJars returns the directory of jars that a hack/ script fetched: $env when set,
// otherwise <cache>/name/version, where the cache is $KAFKA_MIRROR_CACHE,
// $XDG_CACHE_HOME/kafka-mirror or ~/.cache/kafka-mirror (as hack/envtest.sh's). The
// directory must hold a file matching marker; the error names what (the jars of what)
// is missing and how to get it.
func CachedJars(env, name, version, marker, what, howTo string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		dir = filepath.Join(cacheDir(), name, version)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, marker))
	if len(matches) == 0 {
		return "", fmt.Errorf("%s are not in %s: %s", what, dir, howTo)
	}
	return dir, nil
}

// cacheDir is the cache hack/envtest.sh and hack/kafka.sh share.
func cacheDir() string {
	if dir := os.Getenv("KAFKA_MIRROR_CACHE"); dir != "" {
		return dir
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "kafka-mirror")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "kafka-mirror")
}
