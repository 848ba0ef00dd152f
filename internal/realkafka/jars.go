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
	dir := os.Getenv(JarsEnv)
	if dir == "" {
		dir = filepath.Join(cacheDir(), "kafka", Version)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar"))
	if len(matches) == 0 {
		return "", fmt.Errorf("the Apache Kafka jars are not in %s: run `make kafka` (hack/kafka.sh fetches them from Maven Central once, needs mvn and java) and set %s to the directory it prints, or run the tests through `make e2e-kafka`", dir, JarsEnv)
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
