package mirror

import (
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestSourceTopicRecreated deletes the mirrored source topic after 500 records per
// partition were mirrored, creates it again with the same partitions and writes 800
// more per partition, with the engine stopped during the re-creation or running through
// it, in both delivery modes. The new topic's offsets start at 0 again: a position
// stored for the old topic (the target-side progress, the offset in the last
// transaction, a late commit of a claim of the old topic) must not be used for it.
// Every record of both incarnations must be on the target (it lost 1,000 of the 1,600
// new ones, silently), and the engine must say that it started the new topic over.
func TestSourceTopicRecreated(t *testing.T) {
	for name, tc := range map[string]struct {
		exactlyOnce, stopped bool
	}{
		"atLeastOnce/stopped": {stopped: true},
		"atLeastOnce/running": {},
		"exactlyOnce/stopped": {exactlyOnce: true, stopped: true},
		"exactlyOnce/running": {exactlyOnce: true},
	} {
		t.Run(name, func(t *testing.T) { testSourceTopicRecreated(t, tc.exactlyOnce, tc.stopped) })
	}
}

func testSourceTopicRecreated(t *testing.T, exactlyOnce, stopped bool) {
	const partitions, before, after = 2, 500, 800
	c := newClusters(t, partitions)
	cfg := func() *config.Config {
		if exactlyOnce {
			return c.exactlyOnceConfig(t)
		}
		return c.testConfig(t)
	}
	read := readTarget
	if exactlyOnce {
		read = readTargetCommitted
	}
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	r := startEngine(t, cfg(), testLogger(t).WithName("first"))
	read(t, c.target, testTopic, w.total(), time.Second, 2*time.Minute)
	testutil.WaitFor(t, time.Minute, "every partition committed at its end", func() bool {
		n := 0
		for _, p := range r.e.Stats().Partitions {
			if p.Committed == before {
				n++
			}
		}
		return n == partitions
	})
	if stopped {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}

	admin := sourceAdmin(t, c)
	if err := admin.DeleteTopic(testTopic); err != nil {
		t.Fatalf("deleting the source topic: %v", err)
	}
	testutil.WaitFor(t, time.Minute, "the source topic created again", func() bool {
		err := admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
		return err == nil
	})
	// The same workload goes on: the new topic's offsets 0..799 hold records 500..1299.
	w.produce(t, c.source, after)

	if stopped {
		r = startEngine(t, cfg(), testLogger(t).WithName("second"))
	}
	got := read(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 {
		t.Fatalf("source topic re-created: %d of %d records on the target, %d missing (%d duplicates); want 0 missing",
			res.records, w.total(), res.missing, res.duplicates)
	}
	if exactlyOnce && res.duplicates != 0 {
		t.Fatalf("source topic re-created, exactly once: %d duplicates read committed, want 0", res.duplicates)
	}
	var recreated int64
	for _, p := range r.e.Stats().Partitions {
		recreated += p.Recreated
	}
	if recreated < partitions {
		t.Errorf("the engine counted %d partition starts of a re-created topic, want at least %d", recreated, partitions)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	mfs, err := r.e.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, mf := range mfs {
		if mf.GetName() == "kafka_mirror_topic_recreated_total" {
			for _, m := range mf.GetMetric() {
				counted += m.GetCounter().GetValue()
			}
		}
	}
	if counted != float64(recreated) {
		t.Errorf("kafka_mirror_topic_recreated_total sums to %v, want %d (the engine's count)", counted, recreated)
	}
	t.Logf("source topic re-created (exactlyOnce %v, engine stopped %v): %d records on the target, 0 missing, %d duplicates",
		exactlyOnce, stopped, res.records, res.duplicates)
}

// TestSourceTopicRecreatedOutOfRange re-creates the source topic under a running engine
// whose topic loop will not look again for an hour, and writes fewer records to the new
// topic than the old one's offset: the claims' fetches at the old offset are answered
// out of range before anything else notices the new topic ID. That is no gap (the
// engine used to stop with "records were deleted before they were mirrored", which a
// CI run hit when the re-creation raced the topic loop): the engine reads the ID, sees
// the new incarnation and starts it at its beginning, losing nothing of either topic.
func TestSourceTopicRecreatedOutOfRange(t *testing.T) {
	const partitions, before, fewer, more = 2, 500, 300, 400
	c := newClusters(t, partitions)
	cfg := c.testConfig(t)
	cfg.TopicSyncInterval = config.Duration{Duration: time.Hour}
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, w.total(), time.Second, 2*time.Minute)

	admin := sourceAdmin(t, c)
	if err := admin.DeleteTopic(testTopic); err != nil {
		t.Fatalf("deleting the source topic: %v", err)
	}
	testutil.WaitFor(t, time.Minute, "the source topic created again", func() bool {
		return admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false) == nil
	})
	w.produce(t, c.source, fewer)
	testutil.WaitFor(t, 2*time.Minute, "both partitions of the new topic started over", func() bool {
		var n int64
		for _, p := range r.e.Stats().Partitions {
			n += p.Recreated
		}
		return n >= partitions || r.e.isFailed()
	})
	if r.e.isFailed() {
		t.Fatalf("the engine stopped on the re-created topic's out-of-range offsets: %v", r.stop(t))
	}
	w.produce(t, c.source, more)
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 {
		t.Fatalf("source topic re-created, offsets out of range: %d of %d records on the target, %d missing; want 0 missing",
			res.records, w.total(), res.missing)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("source topic re-created below the old offsets: %d records on the target, 0 missing, %d duplicates", res.records, res.duplicates)
}
