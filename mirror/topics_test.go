package mirror

import (
	"testing"
	"time"

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
