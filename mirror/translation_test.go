package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// readOffsetSyncRecords returns every offset sync of partition tp in the sync topic of
// cfg, in the order they were written.
func readOffsetSyncRecords(t *testing.T, c *testClusters, cfg *config.Config, tp partitionKey) []OffsetSync {
	t.Helper()
	topic := OffsetSyncTopic(cfg.ConsumerGroup)
	ends := topicEndOffsets(t, c.target, topic)
	if ends[0] == 0 {
		return nil
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(c.target.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var out []OffsetSync
	deadline := time.Now().Add(20 * time.Second)
	for next := int64(0); next < ends[0]; {
		if time.Now().After(deadline) {
			t.Fatalf("read the offset sync topic up to %d of %d in 20s", next, ends[0])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := client.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			key, kerr := parseOffsetSyncKey(r.Key)
			s, _, verr := decodeOffsetSync(r.Value)
			if kerr == nil && verr == nil && key == tp {
				out = append(out, s)
			}
		})
	}
	return out
}

// waitForOffsetSync waits until the sync topic holds a sync of tp at target offset target.
func waitForOffsetSync(t *testing.T, c *testClusters, cfg *config.Config, tp partitionKey, target int64, what string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, s := range readOffsetSyncRecords(t, c, cfg, tp) {
			if s.TargetOffset == target {
				return nil
			}
		}
		return fmt.Errorf("no offset sync of %s/%d at target offset %d yet (%s)", tp.topic, tp.partition, target, what)
	})
}

// copiesBySource maps each source offset of partition p to the target offsets of its
// copies, from the workload's "id" headers.
func copiesBySource(t *testing.T, got targetContent, p int32) map[int64][]int64 {
	t.Helper()
	out := map[int64][]int64{}
	for _, r := range got[p] {
		_, i := recordID(t, r)
		out[int64(i)] = append(out[int64(i)], r.Offset)
	}
	return out
}

// checkTranslation fails the test when a consumer reading the target from target skips
// a record at or after source offset committed that is on the target (every copy of it
// is before target), or, when exact, reads a record before committed again.
func checkTranslation(t *testing.T, copies map[int64][]int64, committed, target int64, exact bool) {
	t.Helper()
	var skipped, again []int64
	for source, at := range copies {
		readable := false
		for _, o := range at {
			if o >= target {
				readable = true
			}
		}
		switch {
		case source >= committed && !readable:
			skipped = append(skipped, source)
		case source < committed && readable && exact:
			again = append(again, source)
		}
	}
	if len(skipped) > 0 || len(again) > 0 {
		t.Fatalf("source offset %d translated to target offset %d (exact %v): %d records skipped (from %d), %d read again though exact",
			committed, target, exact, len(skipped), minOf(skipped), len(again))
	}
}

func minOf(s []int64) int64 {
	if len(s) == 0 {
		return -1
	}
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

// TestTranslationAfterASlowDrainSkipsNothing is issue 30 item 2, on two engines. Engine
// a mirrors 100 records per partition; its produce requests are then held, so that
// records 100..149 stay in flight. Engine b joins: a's drain gives up after 2 s and
// commits 100; b takes one partition and mirrors its records 100..199 to target
// offsets 100..199. a's requests are let through: its 100..149 land at 200..249 and
// its sync writer records them; b then mirrors 200..249 to 250..299. A source group at
// offset 120 of that partition must translate to a target offset from which a
// consumer reads every record at or after 120 (before the fix: 220, exact, skipping
// 150..199), in `offsets translate` and in the checkpoints the engines commit.
func TestTranslationAfterASlowDrainSkipsNothing(t *testing.T) {
	const (
		partitions = 2
		group      = "app"
		drain      = 2 * time.Second
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 100)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Streams = 1
		cfg.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute}
		cfg.Groups = &config.Groups{Include: []string{group}, SyncInterval: config.Duration{Duration: 200 * time.Millisecond}}
	})
	hold := testutil.HoldProducers(c.target, testTopic)
	released := false
	defer func() {
		if !released {
			hold.Release()
		}
	}()
	start := func(name string) *runningEngine {
		return startEngine(t, cfg, testLogger(t).WithName(name), WithDrainTimeout(drain))
	}
	committed := func(r *runningEngine, p int32) int64 {
		for _, ps := range r.e.Stats().Partitions {
			if ps.Partition == p && ps.Assigned {
				return ps.Committed
			}
		}
		return -1
	}

	a := start("a")
	testutil.WaitFor(t, 60*time.Second, "a committing 100 on both partitions", func() bool {
		return committed(a, 0) == 100 && committed(a, 1) == 100
	})
	hold.Hold(hold.Seen()...)
	w.produce(t, c.source, 50)
	testutil.WaitFor(t, 30*time.Second, "a's records 100..149 in flight and held", func() bool {
		return a.e.Stats().InFlight == 2*50 && hold.Holding() > 0
	})

	b := start("b")
	groupStable(t, c.source, cfg.ConsumerGroup, 2, 60*time.Second)
	var moved int32 = -1
	testutil.WaitFor(t, 60*time.Second, "b owning one partition", func() bool {
		for _, ps := range b.e.Stats().Partitions {
			if ps.Assigned {
				moved = ps.Partition
				return true
			}
		}
		return false
	})
	tp := partitionKey{testTopic, moved}
	for _, ps := range a.e.Stats().Partitions {
		if ps.Partition == moved && (ps.Assigned || ps.Committed != 100 || ps.InFlight != 0) {
			t.Fatalf("a's partition %d after its drain gave up: %+v; want released, committed 100", moved, ps)
		}
	}
	w.produceTo(t, c.source, moved, 50)
	testutil.WaitFor(t, 30*time.Second, "b mirroring 100..199 and committing 200", func() bool { return committed(b, moved) == 200 })
	waitForOffsetSync(t, c, cfg, tp, 199, "b's copy of 199")

	hold.Release()
	released = true
	waitForOffsetSync(t, c, cfg, tp, 249, "a's late copy of 149")
	w.produceTo(t, c.source, moved, 50)
	testutil.WaitFor(t, 30*time.Second, "b mirroring 200..249 and committing 250", func() bool { return committed(b, moved) == 250 })
	waitForOffsetSync(t, c, cfg, tp, 299, "b's copy of 249")

	got := readTarget(t, c.target, testTopic, 1, time.Second, 30*time.Second)
	copies := copiesBySource(t, got, moved)
	for s := int64(100); s < 150; s++ {
		if len(copies[s]) != 2 {
			t.Fatalf("source record %d has copies at %v on the target, want two (a's late one and b's): the interleaving did not happen", s, copies[s])
		}
	}

	testutil.CommitOffsets(t, c.source.ListenAddrs(), group, testTopic, map[int32]int64{moved: 120}, "")
	tr, err := TranslateGroup(context.Background(), cfg, group, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Partitions) != 1 || tr.Partitions[0].Partition != moved {
		t.Fatalf("translation %+v: want partition %d only", tr.Partitions, moved)
	}
	pt := tr.Partitions[0]
	t.Logf("source offset 120 of partition %d translates to target offset %d (exact %v); copies of 120: %v, of 150: %v",
		moved, pt.TargetOffset, pt.Exact, copies[120], copies[150])
	checkTranslation(t, copies, 120, pt.TargetOffset, pt.Exact)

	// The engines' checkpoints commit the same translation to the target group.
	waitForCheckpoint(t, cfg, group, 1)
	checkTranslation(t, copies, 120, testutil.CommittedOffsets(t, c.target.ListenAddrs(), group, testTopic, partitions)[moved], false)

	for _, r := range []*runningEngine{a, b} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIdleGroupTranslationStaysExactPastTheSyncBound is the cause of the inexact
// translations TestExactlyOnceGroupFailover saw after a restart (33 for 38): not the
// restart, but the number of offset syncs. A store keeps at most
// maxOffsetSyncsPerPartition syncs per partition and thins the older half of the
// longest chain beyond it; with exactly-once every transaction marker changes the
// offset delta (a sync each), so an idle group's old position lost the syncs around it
// and translated to the safe side, no longer exact, although every sync that made it
// exact was on the target. The syncs around the positions of the groups being
// translated are kept: a fresh translation (`offsets translate`, a restarted engine's
// checkpointer and a failover's final checkpoint, which read every group's offsets
// before the syncs) stays exact.
func TestIdleGroupTranslationStaysExactPastTheSyncBound(t *testing.T) {
	c := newClusters(t, 1)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Hour}}
	})
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.target.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := ensureOffsetSyncTopic(admin, OffsetSyncTopic(cfg.ConsumerGroup)); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	srcAdmin, err := sarama.NewClusterAdmin(c.source.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srcAdmin.Close()
	ids, err := describeTopicIDs(context.Background(), srcAdmin, []string{testTopic})
	if err != nil {
		t.Fatal(err)
	}

	// One chain whose delta changes at every record (a marker after each, as
	// transactions of one record would leave): source offset i landed at 2i.
	records := int64(3 * maxOffsetSyncsPerPartition)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.target.ListenAddrs()...), kgo.DefaultProduceTopic(OffsetSyncTopic(cfg.ConsumerGroup)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := range records {
		s := OffsetSync{SourceOffset: i, TargetOffset: 2 * i, Previous: i - 1, ChainSource: 0, ChainTarget: 0}
		recs = append(recs, &kgo.Record{Key: offsetSyncKey(testTopic, 0), Value: s.encode(ids[testTopic])})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The mirror got to the end; two idle groups sit in the older half.
	testutil.CommitOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, map[int32]int64{0: records}, "")
	positions := map[string]int64{"app-a": 7, "app-b": 101}
	for g, o := range positions {
		testutil.CommitOffsets(t, c.source.ListenAddrs(), g, testTopic, map[int32]int64{0: o}, "")
	}

	t.Run("offsets translate", func(t *testing.T) {
		for g, o := range positions {
			tr, err := TranslateGroup(context.Background(), cfg, g, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Partitions) != 1 {
				t.Fatalf("%s: %d partitions translated, want 1", g, len(tr.Partitions))
			}
			if pt := tr.Partitions[0]; pt.TargetOffset != 2*o || !pt.Exact {
				t.Errorf("%s at source offset %d translates to %d (exact %v), want %d, exact", g, o, pt.TargetOffset, pt.Exact, 2*o)
			}
		}
	})
	t.Run("checkpointer of a restarted engine", func(t *testing.T) {
		conns, err := newLifecycle(cfg, testLogger(t), nil, 0).connect()
		if err != nil {
			t.Fatal(err)
		}
		defer conns.close()
		sel, err := topics.NewSelector(cfg.Topics)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := newGroupCheckpointer(cfg, newCheckpointMetrics(), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		cp.tr = newTranslator(cfg, sel, conns, testLogger(t))
		cp.round(context.Background())
		for g, o := range positions {
			got := testutil.CommittedOffsets(t, c.target.ListenAddrs(), g, testTopic, 1)
			if got[0] != 2*o {
				t.Errorf("%s at source offset %d: the checkpointer committed %d on the target, want %d", g, o, got[0], 2*o)
			}
		}
	})
	// Last: the failover commits its translations to the target groups too.
	t.Run("immediate failover", func(t *testing.T) {
		report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 30 * time.Second}, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, g := range report.Groups {
			for _, gp := range g.Partitions {
				if o, ok := positions[g.Group]; ok {
					found++
					if gp.TargetOffset != 2*o || !gp.Exact {
						t.Errorf("%s at source offset %d: the failover translated %d (exact %v), want %d, exact", g.Group, o, gp.TargetOffset, gp.Exact, 2*o)
					}
				}
			}
		}
		if found != len(positions) {
			t.Fatalf("the failover report names %d of the %d groups' partitions: %+v", found, len(positions), report.Groups)
		}
	})
	// Without the source, from the checkpoints committed above (their metadata names the
	// source offsets).
	t.Run("immediate failover without the source", func(t *testing.T) {
		c.source.Close()
		report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if report.SourceReachable {
			t.Fatal("the failover reached the closed source")
		}
		found := 0
		for _, g := range report.Groups {
			for _, gp := range g.Partitions {
				if o, ok := positions[g.Group]; ok {
					found++
					if gp.TargetOffset != 2*o || !gp.Exact {
						t.Errorf("%s at source offset %d: the failover translated %d (exact %v), want %d, exact", g.Group, o, gp.TargetOffset, gp.Exact, 2*o)
					}
				}
			}
		}
		if found != len(positions) {
			t.Fatalf("the failover report names %d of the %d groups' partitions: %+v", found, len(positions), report.Groups)
		}
	})
}
