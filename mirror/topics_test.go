package mirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestNewTopicIsPickedUp creates a matching source topic while the engine runs: the
// topic loop selects it, the sync creates its target (renamed by the prefix), and the
// streams restart their group session to consume it from its first offset.
func TestNewTopicIsPickedUp(t *testing.T) {
	c := newClusters(t, 2)
	w := newWorkload(2)
	w.produce(t, c.source, 300)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Include = []string{"orders.*"}
		cfg.Topics.Rename = &config.Rename{Prefix: "dc1."}
	})
	r := startEngine(t, cfg, testLogger(t))
	got := readTarget(t, c.target, "dc1."+testTopic, w.total(), time.Second, 30*time.Second)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("renamed topic: %+v", res)
	}

	if err := sourceAdmin(t, c).CreateTopic("orders.new", &sarameTopicDetail2, false); err != nil {
		t.Fatal(err)
	}
	producePlain(t, c.source, "orders.new", 2, 250)
	fresh := readTarget(t, c.target, "dc1.orders.new", 500, time.Second, 30*time.Second)
	for p := int32(0); p < 2; p++ {
		if len(fresh[p]) != 250 || string(fresh[p][0].Value) != "0" {
			t.Fatalf("dc1.orders.new/%d holds %d records starting at %q, want 250 from \"0\"", p, len(fresh[p]), fresh[p][0].Value)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestPartitioningModes mirrors with hash and roundRobin partitioning and with the
// no-data-loss policy off: every record arrives exactly once, and with hash every key
// stays in one target partition.
func TestPartitioningModes(t *testing.T) {
	tests := map[string]struct {
		partitioning config.Partitioning
		noDataLoss   bool
	}{
		"hash":                     {config.PartitioningHash, true},
		"round robin":              {config.PartitioningRoundRobin, true},
		"preserve, noDataLoss off": {config.PartitioningPreserve, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			const partitions = 4
			c := newClusters(t, partitions)
			w := newWorkload(partitions)
			w.produce(t, c.source, 1000)
			cfg := c.testConfig(t, func(cfg *config.Config) {
				cfg.Partitioning = tc.partitioning
				cfg.NoDataLoss = config.BoolPtr(tc.noDataLoss)
			})
			r := startEngine(t, cfg, testLogger(t))
			got := readTarget(t, c.target, testTopic, w.total(), time.Second, 30*time.Second)
			seen := map[string]int{}
			keyPartition := map[string]int32{}
			n := 0
			for p, recs := range got {
				for _, rec := range recs {
					n++
					id := string(rec.Headers[0].Value)
					seen[id]++
					if rec.Key != nil {
						if prev, ok := keyPartition[string(rec.Key)]; ok && prev != p && tc.partitioning == config.PartitioningHash {
							t.Fatalf("key %q in target partitions %d and %d", rec.Key, prev, p)
						}
						keyPartition[string(rec.Key)] = p
					}
				}
			}
			if n != w.total() || len(seen) != w.total() {
				t.Fatalf("target holds %d records, %d distinct; want %d", n, len(seen), w.total())
			}
			if tc.partitioning == config.PartitioningPreserve {
				if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
					t.Fatalf("preserve: %+v", res)
				}
			}
			if tc.partitioning == config.PartitioningRoundRobin && len(got) != partitions {
				t.Fatalf("round robin used %d target partitions, want %d", len(got), partitions)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTargetTopicsBehaveLikeTheSource runs the engine with default settings on a
// compacted source topic: its target is created compacted with the source's configs
// (but not the excluded message.timestamp.type), every keyed record arrives once, and a
// later change of a source config reaches the target on a following topic sync.
func TestTargetTopicsBehaveLikeTheSource(t *testing.T) {
	const (
		topic      = "users"
		partitions = 2
		perPart    = 100
	)
	c := newClusters(t, 1)
	src := sourceAdmin(t, c)
	configs := map[string]*string{
		"cleanup.policy":         ptrTo("compact"),
		"min.compaction.lag.ms":  ptrTo("60000"),
		"segment.bytes":          ptrTo("1048576"),
		"message.timestamp.type": ptrTo("LogAppendTime"), // excluded by default
	}
	if err := src.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}, false); err != nil {
		t.Fatal(err)
	}
	produceKeyed(t, c.source, topic, partitions, perPart)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Topics.Include = []string{topic} })
	if !cfg.SyncTopicConfigsEnabled() {
		t.Fatal("syncTopicConfigs is off by default")
	}
	r := startEngine(t, cfg, testLogger(t))

	got := readTarget(t, c.target, topic, partitions*perPart, time.Second, 30*time.Second)
	seen, dups := map[string]bool{}, 0
	for p, recs := range got {
		for _, rec := range recs {
			if !strings.HasPrefix(string(rec.Key), fmt.Sprintf("p%d-", p)) {
				t.Errorf("record %q landed in target partition %d", rec.Key, p)
			}
			if seen[string(rec.Key)] {
				dups++
			}
			seen[string(rec.Key)] = true
		}
	}
	if lost := partitions*perPart - len(seen); lost != 0 || dups != 0 {
		t.Fatalf("target %s: %d records lost, %d duplicates, want 0 and 0", topic, lost, dups)
	}

	tgt := targetAdmin(t, c)
	want := map[string]string{"cleanup.policy": "compact", "min.compaction.lag.ms": "60000", "segment.bytes": "1048576",
		"message.timestamp.type": "CreateTime"}
	if got := describeTopicConfigs(t, tgt, topic); !hasConfigs(got, want) {
		t.Errorf("target %s configs = %v, want %v", topic, got, want)
	}

	// The next syncs follow a change on the source; the ceiling is generous (the
	// interval is 1 s).
	if err := src.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptrTo("compact,delete")},
		"retention.ms":   {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptrTo("86400000")},
	}, false); err != nil {
		t.Fatal(err)
	}
	want["cleanup.policy"], want["retention.ms"] = "compact,delete", "86400000"
	testutil.WaitFor(t, 30*cfg.TopicSyncInterval.Duration, "the source's config change on the target", func() bool {
		return hasConfigs(describeTopicConfigs(t, tgt, topic), want)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func ptrTo(s string) *string { return &s }

// produceKeyed writes perPartition records with unique keys "p<partition>-<i>" to every
// partition of topic (a compacted topic refuses records without a key).
func produceKeyed(t *testing.T, cl *kfake.Cluster, topic string, partitions int32, perPartition int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("p%d-%d", p, i)), Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// describeTopicConfigs returns every config of a topic as the cluster reports it.
func describeTopicConfigs(t *testing.T, a sarama.ClusterAdmin, topic string) map[string]string {
	t.Helper()
	entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("describing configs of %q: %v", topic, err)
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		out[e.Name] = e.Value
	}
	return out
}

func hasConfigs(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
