package mirror

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestSourcePartitionExpansion adds partitions to the source topic while records flow.
// The engine's topic sync expands the target, the consumer group picks the new
// partitions up at its next metadata refresh, and their records are mirrored from their
// first offset (records written to a new partition before the group saw it are kept).
func TestSourcePartitionExpansion(t *testing.T) {
	start := time.Now()
	const before, after = 4, 6
	c := newClusters(t, before)
	w := newWorkload(before)
	w.produce(t, c.source, 2000)
	r := startEngine(t, c.testConfig(t), testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "the first records mirrored", func() bool { return r.e.Stats().Records >= 4000 })

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.source.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreatePartitions(testTopic, after, nil, false); err != nil {
		t.Fatal(err)
	}
	// Write to the new partitions at once, before the group can have noticed them.
	w.partitions = after
	w.next = append(w.next, make([]int, after-before)...)
	w.produce(t, c.source, 1500)

	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 45*time.Second)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after the expansion: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	for p := int32(before); p < after; p++ {
		first, _ := recordID(t, got[p][0])
		if _, i := recordID(t, got[p][0]); i != 0 || first != p {
			t.Fatalf("new partition %d starts with record %d/%d on the target, want %d/0", p, first, i, p)
		}
	}
	topics, err := targetAdmin(t, c).DescribeTopics([]string{testTopic})
	if err != nil || len(topics) != 1 || len(topics[0].Partitions) != after {
		t.Fatalf("target topic after the expansion: %+v, %v; want %d partitions", topics, err, after)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("expansion %d -> %d partitions: %d records, new partitions mirrored from offset 0, 0 lost, 0 duplicates, in %v",
		before, after, res.records, time.Since(start).Round(time.Millisecond))
}

func targetAdmin(t *testing.T, c *testClusters) sarama.ClusterAdmin {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.target.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}
