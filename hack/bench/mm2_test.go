package main

import (
	"bufio"
	"slices"
	"strings"
	"testing"
	"time"
)

// parseJavaProperties reads what renderJavaProperties writes, the way
// java.util.Properties reads it: key, '=', value, with backslash escapes.
func parseJavaProperties(t *testing.T, s string) map[string]string {
	t.Helper()
	unescape := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] != '\\' || i+1 == len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(s[i])
			}
		}
		return b.String()
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		// The key ends at the first '=' that no backslash escapes.
		sep := -1
		for i := 0; i < len(line); i++ {
			if line[i] == '\\' {
				i++
				continue
			}
			if line[i] == '=' {
				sep = i
				break
			}
		}
		if sep < 0 {
			t.Fatalf("line %q has no unescaped '='", line)
		}
		out[unescape(line[:sep])] = unescape(line[sep+1:])
	}
	return out
}

func TestMM2Properties(t *testing.T) {
	spec := mm2Spec{source: []string{"127.0.0.1:1", "127.0.0.1:2"}, target: []string{"127.0.0.1:3"}, topic: dataTopic, partitions: 8}
	got := parseJavaProperties(t, renderJavaProperties(mm2Properties(spec)))
	want := map[string]string{
		"clusters":                           "source, target",
		"source.bootstrap.servers":           "127.0.0.1:1,127.0.0.1:2",
		"target.bootstrap.servers":           "127.0.0.1:3",
		"source->target.enabled":             "true",
		"target->source.enabled":             "false",
		"source->target.topics":              `bench\.records`, // a regular expression matching the topic alone
		"replication.policy.class":           "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		"tasks.max":                          "8",
		"emit.heartbeats.enabled":            "false",
		"emit.checkpoints.enabled":           "false",
		"sync.topic.configs.enabled":         "false",
		"sync.topic.acls.enabled":            "false",
		"target.producer.acks":               "all",
		"target.producer.enable.idempotence": "true",
		"source.consumer.auto.offset.reset":  "earliest",
		"offset.storage.replication.factor":  "1",
		"config.storage.replication.factor":  "1",
		"status.storage.replication.factor":  "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["target.exactly.once.source.support"]; ok {
		t.Errorf("target.exactly.once.source.support is set without exactlyOnce")
	}
	spec.extra = map[string]string{"target.producer.batch.size": "1048576", "tasks.max": "2"}
	got = mm2Properties(spec)
	if got["target.producer.batch.size"] != "1048576" || got["tasks.max"] != "2" {
		t.Errorf("--mm2-props were not added over the defaults: batch.size %q, tasks.max %q", got["target.producer.batch.size"], got["tasks.max"])
	}
	spec.extra = nil
	spec.exactlyOnce = true
	if got := mm2Properties(spec)["target.exactly.once.source.support"]; got != "enabled" {
		t.Errorf("with exactlyOnce, target.exactly.once.source.support = %q, want enabled", got)
	}
	spec.replicationFactor = 3
	got = mm2Properties(spec)
	for _, k := range []string{"replication.factor", "offset-syncs.topic.replication.factor", "config.storage.replication.factor", "offset.storage.replication.factor", "status.storage.replication.factor"} {
		if got[k] != "3" {
			t.Errorf("on 3-broker clusters, %s = %q, want 3", k, got[k])
		}
	}
}

func TestRenderJavaPropertiesEscapes(t *testing.T) {
	in := map[string]string{
		"b.key":         `C:\path`,
		"a.key":         "two\nlines",
		"source->x=y:z": "v",
		"with space":    "1",
	}
	text := renderJavaProperties(in)
	if !strings.HasPrefix(text, "a.key=") {
		t.Errorf("keys are not sorted:\n%s", text)
	}
	if strings.Count(text, "\n") != len(in) {
		t.Errorf("a value's newline was not escaped:\n%s", text)
	}
	got := parseJavaProperties(t, text)
	for k, v := range in {
		if got[k] != v {
			t.Errorf("%q read back as %q, want %q\n%s", k, got[k], v, text)
		}
	}
}

func TestMM2JVMArgs(t *testing.T) {
	args := strings.Join(mm2JVMArgs("1g", "/jars", "/w/log4j2.properties", "/w/mm2.properties"), " ")
	for _, want := range []string{"-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Dlog4j2.configurationFile=/w/log4j2.properties",
		"-cp /jars/* org.apache.kafka.connect.mirror.MirrorMaker /w/mm2.properties"} {
		if !strings.Contains(args, want) {
			t.Errorf("java arguments %q lack %q", args, want)
		}
	}
	if !strings.HasSuffix(args, "MirrorMaker /w/mm2.properties") {
		t.Errorf("the properties file is not MirrorMaker's only argument: %q", args)
	}
}

func TestMM2JarsError(t *testing.T) {
	t.Setenv(mm2JarsEnv, t.TempDir())
	_, err := mm2Jars()
	if err == nil || !strings.Contains(err.Error(), "make kafka-mm2") || !strings.Contains(err.Error(), mm2JarsEnv) {
		t.Errorf("mm2Jars() with no jars = %v, want an error naming make kafka-mm2 and %s", err, mm2JarsEnv)
	}
}

func TestParseOptionsKafkaReal(t *testing.T) {
	o, err := parseOptions([]string{"--kafka", "real"})
	if err != nil {
		t.Fatal(err)
	}
	if o.mm2Heap != defaultMM2Heap {
		t.Errorf("--mm2-heap defaults to %q, want %q", o.mm2Heap, defaultMM2Heap)
	}
	if o.records != 200_000 || o.valueSize != 1024 || o.rounds != 3 || o.partitions != 8 || !o.realKill {
		t.Errorf("--kafka real defaults: records %d, value size %d, rounds %d, partitions %d, kill9 %v", o.records, o.valueSize, o.rounds, o.partitions, o.realKill)
	}
	o, err = parseOptions([]string{"--kafka", "real", "--records", "5000", "--rounds", "1", "--kill9=false"})
	if err != nil {
		t.Fatal(err)
	}
	if o.records != 5000 || o.rounds != 1 || o.realKill {
		t.Errorf("explicit flags were overridden: records %d, rounds %d, kill9 %v", o.records, o.rounds, o.realKill)
	}
	o, err = parseOptions([]string{"--kafka", "real", "--mm2-props", "target.producer.batch.size=1048576, target.producer.linger.ms=5"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.mm2Props) != 2 || o.mm2Props["target.producer.batch.size"] != "1048576" || o.mm2Props["target.producer.linger.ms"] != "5" {
		t.Errorf("--mm2-props parsed as %v", o.mm2Props)
	}
	if _, err := parseOptions([]string{"--kafka", "real", "--mm2-props", "novalue"}); err == nil || !strings.Contains(err.Error(), "--mm2-props") {
		t.Errorf("--mm2-props novalue: err = %v, want one naming --mm2-props", err)
	}
	o, err = parseOptions([]string{"--kafka", "real"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.realArms, []string{realEngine, realForwarder, realMM2}) || o.realBrokers != 1 {
		t.Errorf("--kafka real: arms %q, brokers %d; want the engine, the forwarder and MirrorMaker 2 on single brokers", o.realArms, o.realBrokers)
	}
	o, err = parseOptions([]string{"--kafka", "real", "--real-arms", "kafka-mirror-eos, mm2-eos", "--real-brokers", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.realArms, []string{realEngineEOS, realMM2EOS}) || o.realBrokers != 3 {
		t.Errorf("--real-arms kafka-mirror-eos,mm2-eos --real-brokers 3: arms %q, brokers %d", o.realArms, o.realBrokers)
	}
	for _, args := range [][]string{{"--real-arms", "mm3"}, {"--real-arms", "mm2,mm2"}, {"--real-arms", ","}, {"--real-brokers", "2"}} {
		flagName := args[0]
		if _, err := parseOptions(append([]string{"--kafka", "real"}, args...)); err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%q: err = %v, want one naming %s", args, err, flagName)
		}
	}
	if _, err := parseOptions([]string{"--kafka", "kraft"}); err == nil || !strings.Contains(err.Error(), "--kafka") {
		t.Errorf("--kafka kraft: err = %v, want one naming --kafka", err)
	}
}

func TestSummarizeReal(t *testing.T) {
	run := func(arm string, rps float64, cpu float64, rss int64) realResult {
		return realResult{Arm: arm, engineResult: engineResult{
			Rate:          rate{Records: int(rps), Elapsed: time.Second},
			CPUPerMillion: cpu, MaxRSS: rss, StartupSeconds: 1,
		}, Audit: audit{Read: 10, Distinct: 10}}
	}
	runs := []realResult{
		run(realMM2EOS, 50, 40, 700),
		run(realMM2, 100, 30, 600), run(realEngine, 300, 10, 100),
		run(realMM2, 200, 20, 500), run(realEngine, 100, 12, 120),
		run(realMM2, 300, 10, 400), run(realEngine, 200, 11, 110),
	}
	got := summarizeReal(runs)
	if len(got) != 3 || got[0].Arm != realEngine || got[1].Arm != realMM2 || got[2].Arm != realMM2EOS {
		t.Fatalf("summaries %+v: want the engine, MirrorMaker 2, then MirrorMaker 2 exactly-once (no forwarder runs)", got)
	}
	if e := got[0]; e.Rate != 200 || e.CPUPerMillion != 11 || e.MaxRSS != 110 || e.Runs != 3 || e.Audited != 30 {
		t.Errorf("engine summary %+v: want medians 200 records/s, 11 CPU s, 110 B, 3 runs, 30 audited", e)
	}
	if m := got[1]; m.Rate != 200 || m.CPUPerMillion != 20 || m.MaxRSS != 500 {
		t.Errorf("MirrorMaker 2 summary %+v: want medians 200 records/s, 20 CPU s, 500 B", m)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// A command name with a space and a ')' in it, utime 250 and stime 50 ticks.
	stat := "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 40 0 100 0 0"
	got, err := parseProcStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("parseProcStatCPU = %v, want %v (300 ticks of 1/%d s)", got, want, clockTicks)
	}
	if _, err := parseProcStatCPU("4242 (java) S 1 2"); err == nil {
		t.Error("a truncated stat line parsed without an error")
	}
	if _, err := parseProcStatCPU("no parentheses"); err == nil {
		t.Error("a stat line without a command name parsed without an error")
	}
}

func TestArmFileName(t *testing.T) {
	for arm, want := range map[string]string{
		realEngine:    "kafka-mirror",
		realForwarder: "sarama-forwarder",
		realMM2EOS:    "mirrormaker-2-exactly.once.source.support",
		realEngineEOS: "kafka-mirror-exactlyonce",
	} {
		if got := armFileName(arm); got != want {
			t.Errorf("armFileName(%q) = %q, want %q", arm, got, want)
		}
	}
}
