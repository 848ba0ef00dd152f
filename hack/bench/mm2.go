package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
)

// MirrorMaker 2 as the benchmark runs it (--kafka real, issue 27): dedicated mode, one
// JVM, `java -cp '<jars>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`.
const (
	// mm2Version is what hack/kafka/mm2/pom.xml fetches: connect-mirror 4.4.0 and 4.3.2
	// are not in Maven Central, 4.3.1 is; its clients speak to the 4.4.0 brokers.
	mm2Version = "4.3.1"
	// mm2JarsEnv names the directory of MirrorMaker's jars; `make bench KAFKA=real` sets
	// it to what hack/kafka-mm2.sh prints.
	mm2JarsEnv = "MM2_JARS"
	mm2Main    = "org.apache.kafka.connect.mirror.MirrorMaker"
	// The cluster aliases of mm2.properties.
	mm2SourceAlias = "source"
	mm2TargetAlias = "target"
)

// mm2HeapMin is MirrorMaker's -Xms, as connect-mirror-maker.sh starts it; its -Xmx is
// --mm2-heap (default defaultMM2Heap, where the script says 2G). With 512m, MirrorMaker
// ran out of heap in the first run: each of its 8 tasks has a consumer (fetch.max.bytes
// 50 MiB) and a producer (buffer.memory 32 MiB) of its own.
const (
	mm2HeapMin     = "256m"
	defaultMM2Heap = "1g"
)

// mm2Spec is one MirrorMaker 2 run: the flow from source to target for topic.
type mm2Spec struct {
	source, target []string
	topic          string
	partitions     int
	// exactlyOnce turns on exactly.once.source.support on the target's worker (KIP-618).
	exactlyOnce bool
	// replicationFactor is that of MirrorMaker's internal topics: 1 (the default) on
	// single-broker clusters, 3 on three.
	replicationFactor int
	// extra are added last, over the properties above (--mm2-props).
	extra map[string]string
}

// mm2Properties is the mm2.properties of spec: one flow source->target of the topic,
// topic names kept (IdentityReplicationPolicy), one task per partition, its producer
// with acks=all and idempotence (as ours), and everything a throughput run does not
// need turned off (heartbeats, checkpoints, group offset sync, topic config and ACL sync,
// group refresh). Offset syncs stay on: MirrorSourceConnector refuses
// emit.offset-syncs.enabled=false while the checkpoint connector is configured. The
// internal topics are created with the spec's replication factor (1 by default).
func mm2Properties(s mm2Spec) map[string]string {
	src, tgt := mm2SourceAlias, mm2TargetAlias
	rf := "1"
	if s.replicationFactor > 1 {
		rf = strconv.Itoa(s.replicationFactor)
	}
	flow := src + "->" + tgt
	back := tgt + "->" + src
	p := map[string]string{
		"clusters":                              src + ", " + tgt,
		src + ".bootstrap.servers":              strings.Join(s.source, ","),
		tgt + ".bootstrap.servers":              strings.Join(s.target, ","),
		flow + ".enabled":                       "true",
		flow + ".topics":                        regexp.QuoteMeta(s.topic),
		back + ".enabled":                       "false",
		"replication.policy.class":              "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"tasks.max":                             strconv.Itoa(s.partitions),
		"emit.heartbeats.enabled":               "false",
		"emit.checkpoints.enabled":              "false",
		"sync.group.offsets.enabled":            "false",
		"sync.topic.configs.enabled":            "false",
		"sync.topic.acls.enabled":               "false",
		"refresh.groups.enabled":                "false",
		"replication.factor":                    rf,
		"offset-syncs.topic.replication.factor": rf,
		"heartbeats.topic.replication.factor":   rf,
		"checkpoints.topic.replication.factor":  rf,
		"config.storage.replication.factor":     rf,
		"offset.storage.replication.factor":     rf,
		"status.storage.replication.factor":     rf,
		tgt + ".producer.acks":                  "all",
		tgt + ".producer.enable.idempotence":    "true",
		src + ".consumer.auto.offset.reset":     "earliest",
	}
	if s.exactlyOnce {
		// Per target cluster, as the MirrorMaker documentation writes it; the worker then
		// writes each task's records and source offsets in one transaction.
		p[tgt+".exactly.once.source.support"] = "enabled"
	}
	for k, v := range s.extra {
		p[k] = v
	}
	return p
}

// mm2InternalTopics are the topics MirrorMaker's worker keeps on the target for the flow
// from source (its connectors' configs, source offsets and statuses). The benchmark
// deletes them after each run so that the next one starts from the oldest offsets.
func mm2InternalTopics() []string {
	var out []string
	for _, kind := range []string{"configs", "offsets", "status"} {
		out = append(out, fmt.Sprintf("mm2-%s.%s.internal", kind, mm2SourceAlias))
	}
	return out
}

// renderJavaProperties writes p as a Java properties file, keys sorted, with the
// characters a properties file would misread escaped.
func renderJavaProperties(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	esc := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`)
	keyEsc := strings.NewReplacer(`\`, `\\`, " ", `\ `, "=", `\=`, ":", `\:`)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", keyEsc.Replace(k), esc.Replace(p[k]))
	}
	return b.String()
}

// mm2Log4j sends MirrorMaker's log to stdout (its log file) at WARN: at INFO, Connect
// writes megabytes per run.
const mm2Log4j = `status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
`

// mm2JVMArgs are the java arguments of a MirrorMaker run: -Xms mm2HeapMin, -Xmx heap, the
// collector flags of Kafka's own kafka-run-class.sh (G1, 20 ms pause goal), its log4j
// config, and the jars.
func mm2JVMArgs(heap, jars, log4jPath, propsPath string) []string {
	return []string{
		"-Xms" + mm2HeapMin, "-Xmx" + heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + log4jPath,
		"-cp", filepath.Join(jars, "*"),
		mm2Main, propsPath,
	}
}

// mm2Jars returns the directory of MirrorMaker's jars: $MM2_JARS when set, otherwise the
// cache hack/kafka-mm2.sh fills. The error says how to get them.
func mm2Jars() (string, error) {
	return realkafka.CachedJars(mm2JarsEnv, "mm2", mm2Version, "connect-mirror-[0-9]*.jar", "the MirrorMaker 2 jars",
		"run `make kafka-mm2` (hack/kafka-mm2.sh fetches them from Maven Central once, needs mvn and java) and set "+mm2JarsEnv+" to the directory it prints, or run `make bench KAFKA=real`")
}
