package mirror

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// shortOffsetRetention makes a kfake cluster expire the offsets of a group without
// members 2 s after their last commit, checked every 200 ms: Kafka's
// offsets.retention.minutes (7 days by default), scaled down (offset.retention.ms is
// kfake's millisecond form of it).
func shortOffsetRetention() kfake.Opt {
	return kfake.BrokerConfigs(map[string]string{
		"offset.retention.ms":                 "2000",
		"offsets.retention.check.interval.ms": "200",
	})
}

// newExpiringClusters is newClusters with the same short offset retention on both
// clusters, as Kafka's default is the same (7 days) on both.
func newExpiringClusters(t *testing.T, partitions int32) *testClusters {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic), shortOffsetRetention())
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1), shortOffsetRetention())
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(); tgt.Close() })
	c := &testClusters{source: src, target: tgt}
	// The workload's record timestamps are from 2023: without retention.ms -1 (copied
	// to the target topic by the topic sync) a compaction run of the target, which
	// applies time retention too, would delete the mirrored records.
	keep := "-1"
	if err := sourceAdmin(t, c).AlterConfig(sarama.TopicResource, testTopic, map[string]*string{"retention.ms": &keep}, false); err != nil {
		t.Fatal(err)
	}
	return c
}

// groupOffsets returns the committed offsets of group for topic on cl; empty once the
// group's offsets expired.
func groupOffsets(t *testing.T, cl *kfake.Cluster, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		if b := resp.GetBlock(topic, p); b != nil && b.Offset >= 0 {
			out[p] = b.Offset
		}
	}
	return out
}

// pauseUntilBothGroupsExpire waits, with the mirror stopped, until the source group
// and the target-side progress group have no offsets left, and at least pause.
func pauseUntilBothGroupsExpire(t *testing.T, c *testClusters, group string, partitions int32, pause time.Duration) time.Time {
	t.Helper()
	paused := time.Now()
	testutil.WaitFor(t, 30*time.Second, "the source group and the target-side progress group expired", func() bool {
		return len(groupOffsets(t, c.source, group, testTopic, partitions)) == 0 &&
			len(groupOffsets(t, c.target, ProgressGroup(group), testTopic, partitions)) == 0
	})
	time.Sleep(max(0, pause-time.Since(paused)))
	return paused
}

// TestProgressOutlivesBothGroupsExpiring pauses a mirror for longer than the offset
// retention of both clusters, which is equal on both (Kafka's default is 7 days on
// each): the source group and the target-side progress group have no members while the
// mirror is stopped, so both expire together (issue 30 item 10). The mirror must still
// resume where it was, after the target compacted its topics: every record once, none
// lost, with either initialOffset and in both delivery modes. Before the progress
// topic, the restart began at initialOffset: 600 of 1,400 records twice with oldest,
// 800 lost with latest.
func TestProgressOutlivesBothGroupsExpiring(t *testing.T) {
	const (
		partitions = 2
		before     = 300
		after      = 400
	)
	for _, tc := range []struct {
		name        string
		exactlyOnce bool
		// latest restarts with initialOffset latest, where starting over loses the
		// records written during the pause instead of mirroring everything twice.
		latest bool
	}{
		{name: "atLeastOnce/oldest"},
		{name: "atLeastOnce/latest", latest: true},
		{name: "exactlyOnce", exactlyOnce: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newExpiringClusters(t, partitions)
			// The restart runs with initialOffset latest in the latest case; the first
			// run mirrors from the oldest offset.
			cfg := func(restart bool) *config.Config {
				latest := func(cfg *config.Config) {
					if restart && tc.latest {
						cfg.InitialOffset = config.InitialOffsetLatest
					}
				}
				if tc.exactlyOnce {
					return c.exactlyOnceConfig(t, latest)
				}
				return c.testConfig(t, latest)
			}
			w := newWorkload(partitions)
			w.produce(t, c.source, before)

			first := startEngine(t, cfg(false), testLogger(t).WithName("first"))
			testutil.WaitFor(t, 30*time.Second, "every partition committed at 300", func() bool {
				done := 0
				for _, p := range first.e.Stats().Partitions {
					if p.Committed == before {
						done++
					}
				}
				return done == partitions
			})
			if err := first.stop(t); err != nil {
				t.Fatal(err)
			}

			// The pause: both groups expire, 2 s after their last commits; the target
			// compacts its topics meanwhile.
			paused := pauseUntilBothGroupsExpire(t, c, cfg(false).ConsumerGroup, partitions, 3*time.Second)
			c.target.Compact()
			w.produce(t, c.source, after)

			logs, log := newLogLines(t)
			second := startEngine(t, cfg(true), log.WithName("second"))
			read := readTarget
			if tc.exactlyOnce {
				read = readTargetCommitted
			}
			got := read(t, c.target, testTopic, w.total(), 2*time.Second, time.Minute)
			res := audit(t, w, got, true, true)
			if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
				t.Errorf("after both groups expired: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
					res.records, res.missing, res.duplicates, w.total())
			}
			if n := logs.count("Started partition at initialOffset"); n != 0 {
				t.Errorf("%d partitions started at initialOffset after the pause, want 0", n)
			}
			// A rebalance before the first commit resumes a partition from the topic
			// again: at least once each.
			for p := range partitions {
				if n := logs.count("Resumed from the progress topic", fmt.Sprintf(`"partition"=%d `, p), `"offset"=300`); n == 0 {
					t.Errorf("no log line says partition %d resumed from the progress topic at 300", p)
				}
			}
			for _, p := range second.e.Stats().Partitions {
				if p.ResumedFromTarget == 0 {
					t.Errorf("Stats count no resume from the target for partition %d", p.Partition)
				}
			}
			if err := second.stop(t); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: paused %v with 2 s offset retention on both clusters: %d records, %d missing, %d duplicates",
				tc.name, time.Since(paused).Round(100*time.Millisecond), res.records, res.missing, res.duplicates)
		})
	}
}

// TestProgressTopicOfAnotherIncarnation pauses a mirror until both groups expired, and
// meanwhile the source topic is deleted and created again: the progress topic's
// records name the old topic's ID, so the new topic starts at its beginning (resuming
// at the old offset 300 would skip the new topic's first 300 records per partition)
// and the engine says that the topic was re-created.
func TestProgressTopicOfAnotherIncarnation(t *testing.T) {
	const partitions, before, after = 2, 300, 400
	c := newExpiringClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	first := startEngine(t, c.testConfig(t), testLogger(t).WithName("first"))
	testutil.WaitFor(t, 30*time.Second, "every partition committed at 300", func() bool {
		done := 0
		for _, p := range first.e.Stats().Partitions {
			if p.Committed == before {
				done++
			}
		}
		return done == partitions
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	admin := sourceAdmin(t, c)
	if err := admin.DeleteTopic(testTopic); err != nil {
		t.Fatalf("deleting the source topic: %v", err)
	}
	testutil.WaitFor(t, time.Minute, "the source topic created again", func() bool {
		return admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false) == nil
	})
	pauseUntilBothGroupsExpire(t, c, c.testConfig(t).ConsumerGroup, partitions, 0)
	// The new topic's offsets 0..399 hold records 300..699.
	w.produce(t, c.source, after)

	logs, log := newLogLines(t)
	second := startEngine(t, c.testConfig(t), log.WithName("second"))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 {
		t.Errorf("source topic re-created during the pause: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	// Once per partition, or more: a rebalance of the second engine's start judges the
	// record again.
	for p := 0; p < partitions; p++ {
		if n := logs.count("source topic was deleted and created again", "progress topic", fmt.Sprintf(`"partition"=%d `, p)); n == 0 {
			t.Errorf("no log line says partition %d's progress topic record was of the deleted topic", p)
		}
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
}
