package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// TestOffsetSyncsOfARecreatedTopicAreNotUsed mirrors a topic with groups on (offset
// syncs written), stops, re-creates the source topic and lets an application group
// commit offset 300 on the new topic before the mirror has mirrored any of it. The old
// topic's syncs say that source offset 300 landed at target offset 300: translating
// through them sends a consumer that fails over to the old topic's records, "exactly".
// The offset must stay untranslated (and uncheckpointed) until syncs of the new topic
// exist, and then translate through those: to the new topic's record 300, after the
// old topic's 500 records, with a checkpoint that names the new topic ID.
func TestOffsetSyncsOfARecreatedTopicAreNotUsed(t *testing.T) {
	const (
		partitions = 2
		group      = "app"
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{group}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	})
	r := startEngine(t, cfg, testLogger(t).WithName("first"))
	testutil.WaitFor(t, time.Minute, "500 records per partition committed", func() bool {
		done := 0
		for _, p := range r.e.Stats().Partitions {
			if p.Committed == 500 {
				done++
			}
		}
		return done == partitions
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	admin := sourceAdmin(t, c)
	if err := admin.DeleteTopic(testTopic); err != nil {
		t.Fatalf("deleting the source topic: %v", err)
	}
	testutil.WaitFor(t, time.Minute, "the source topic created again", func() bool {
		return admin.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false) == nil
	})
	ids, err := sourceTopicIDs(context.Background(), admin, []string{testTopic})
	if err != nil || ids[testTopic] == "" {
		t.Fatalf("reading the new topic's ID: %q, %v", ids[testTopic], err)
	}
	newID := ids[testTopic]
	w.produce(t, c.source, 800)
	testutil.CommitOffsets(t, c.source.ListenAddrs(), group, testTopic, map[int32]int64{0: 300, 1: 300}, "")

	before, err := TranslateGroup(context.Background(), cfg, group, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Partitions) != partitions {
		t.Fatalf("translated %d partitions, want %d", len(before.Partitions), partitions)
	}
	for _, pt := range before.Partitions {
		if pt.TargetOffset != -1 || pt.Committed {
			t.Fatalf("%s/%d: source offset %d of the re-created topic translated to target offset %d (exact %v, committed %v) through the old topic's syncs, want -1 (no sync of the new topic yet)",
				pt.Topic, pt.Partition, pt.SourceOffset, pt.TargetOffset, pt.Exact, pt.Committed)
		}
	}

	r = startEngine(t, cfg, testLogger(t).WithName("second"))
	testutil.WaitFor(t, time.Minute, "the new topic mirrored", func() bool {
		done := 0
		for _, p := range r.e.Stats().Partitions {
			if p.Committed == 800 {
				done++
			}
		}
		return done == partitions
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	after, err := TranslateGroup(context.Background(), cfg, group, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range after.Partitions {
		if pt.TargetOffset != 800 || !pt.Exact || !pt.Committed || pt.SourceTopicID != newID {
			t.Fatalf("%s/%d: source offset %d of the new topic translated to %d (exact %v, committed %v, topic ID %q), want 800, exact, committed, %q",
				pt.Topic, pt.Partition, pt.SourceOffset, pt.TargetOffset, pt.Exact, pt.Committed, pt.SourceTopicID, newID)
		}
	}
	resp, err := listOffsets(targetAdminOf(t, c), group, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		b := blockOf(resp, testTopic, p)
		if b == nil {
			t.Fatalf("no checkpoint of %s/%d on the target", testTopic, p)
		}
		md, ok := ParseCheckpointMetadata(b.Metadata)
		if b.Offset != 800 || !ok || md.SourceTopicID != newID {
			t.Fatalf("checkpoint of %s/%d: offset %d, metadata %q; want 800 naming topic ID %q", testTopic, p, b.Offset, b.Metadata, newID)
		}
	}
}

func targetAdminOf(t *testing.T, c *testClusters) sarama.ClusterAdmin {
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

// TestOffsetSyncStoreKeepsIncarnationsApart feeds a store the syncs of two incarnations
// of a topic, as a sync topic holds them, and checks which ones translate an offset of
// each: with the old topic's syncs naming its ID, or naming none (written by an engine
// of an earlier release).
func TestOffsetSyncStoreKeepsIncarnationsApart(t *testing.T) {
	const oldID, newID = "old-topic-id", "new-topic-id"
	tp := partitionKey{"t", 0}
	// The old topic: records 0..499 at target 0..499. The new topic: its records 0..799
	// at target 500..1299.
	oldChain := chain([3]int64{0, 0, -1}, [3]int64{499, 499, 0})
	oldChain[1].End = true
	newChain := chain([3]int64{0, 500, -1}, [3]int64{799, 1299, 0})
	fill := func(oldSyncsID string) *offsetSyncStore {
		st := newOffsetSyncStore("x")
		for _, s := range oldChain {
			st.add(tp, oldSyncsID, s)
		}
		for _, s := range newChain {
			st.add(tp, newID, s)
		}
		return st
	}
	tests := map[string]struct {
		oldSyncsID string
		topicID    string
		committed  int64
		want       int64
		wantOK     bool
	}{
		"the new topic, through its own syncs":            {oldSyncsID: oldID, topicID: newID, committed: 300, want: 800, wantOK: true},
		"the new topic, at its first record":              {oldSyncsID: oldID, topicID: newID, committed: 0, want: 500, wantOK: true},
		"the old topic's offset, through the old syncs":   {oldSyncsID: oldID, topicID: oldID, committed: 300, want: 300, wantOK: true},
		"a topic ID no sync names: not translated":        {oldSyncsID: oldID, topicID: "third-topic-id", committed: 300},
		"old syncs of no ID: an offset they cover is not": {oldSyncsID: "", topicID: newID, committed: 300},
		"old syncs of no ID: an offset past them is":      {oldSyncsID: "", topicID: newID, committed: 600, want: 1100, wantOK: true},
		"a cluster without topic IDs: the syncs of none":  {oldSyncsID: "", topicID: "", committed: 300, want: 300, wantOK: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, exact, ok := fill(tc.oldSyncsID).translate(tp, tc.topicID, tc.committed)
			if ok != tc.wantOK || ok && (got != tc.want || !exact) {
				t.Fatalf("translate(%q, %d) = %d, exact %v, ok %v; want %d, exact, ok %v",
					tc.topicID, tc.committed, got, exact, ok, tc.want, tc.wantOK)
			}
		})
	}

	// Once the topic's current ID is known, the chains of every other ID are gone for
	// good (IDs are never reused).
	st := fill(oldID)
	if _, _, ok := st.translate(tp, newID, 300); !ok {
		t.Fatal("the new topic's offset did not translate")
	}
	if st.partition(tp, oldID) != nil || st.partition(tp, newID) == nil {
		t.Fatalf("after a translation of the new topic the store holds IDs %v, want no %q", keysOf(st.parts[tp]), oldID)
	}
}

// TestOffsetSyncsOfARollingUpgrade plays a rolling upgrade: the partition moves from a
// process of the earlier release (syncs without an ID) to an upgraded one (Y), back to
// one of the earlier release (L) and to an upgraded one again (Z), each drain clean.
// L's chain wrote after the topic's first chain with an ID, so it mirrored the
// current topic: leaving it out would translate 250 past L's copies of 250..299, to
// Z's first record at 300. The chain before Y may be another incarnation's: an offset
// it covers is not translated.
func TestOffsetSyncsOfARollingUpgrade(t *testing.T) {
	const id = "topic-id"
	tp := partitionKey{"t", 0}
	st := newOffsetSyncStore("x")
	for _, c := range []struct {
		id          string
		first, last int64 // source offsets; each record lands at the same target offset
		end         bool
	}{
		{"", 0, 99, true},
		{id, 100, 199, true},
		{"", 200, 299, true},
		{id, 300, 399, false},
	} {
		for _, s := range chain([3]int64{c.first, c.first, -1}, [3]int64{c.last, c.last, c.first}) {
			s.End = c.end && s.SourceOffset == c.last
			st.add(tp, c.id, s)
		}
	}
	for _, tc := range []struct {
		committed, want int64
		ok              bool
	}{
		{committed: 50},
		{committed: 150, want: 150, ok: true},
		{committed: 250, want: 250, ok: true},
		{committed: 350, want: 350, ok: true},
	} {
		got, exact, ok := st.translate(tp, id, tc.committed)
		if ok != tc.ok || ok && (got != tc.want || !exact) {
			t.Errorf("translate(%d) = %d, exact %v, ok %v; want %d, exact, ok %v", tc.committed, got, exact, ok, tc.want, tc.ok)
		}
	}
}

// TestOffsetSyncsNameTheAssignmentsTopicID checks that the writer names, in each sync,
// the topic ID of the assignment whose acks it describes: also for the late acks of an
// assignment that ended (its drain gave up) when the partition was assigned again, to a
// claim of the re-created topic.
func TestOffsetSyncsNameTheAssignmentsTopicID(t *testing.T) {
	w := &offsetSyncWriter{queue: make(chan queuedSync, 16)}
	p := &partitionState{topic: "t"}
	old, cur := offsets.New(16), offsets.New(16)
	oldTicket := old.Add(499, 1)
	// The old claim ended with 499 still in flight (its ack comes late); a claim of
	// the re-created topic has the partition now.
	p.tracker, p.topicID = old, "old-topic-id"
	p.detach()
	p.tracker, p.topicID, p.assigned = cur, "new-topic-id", true
	cur.Add(0, 1)
	// The old claim's late ack comes first: its chain starts after the new claim
	// attached, and must name the old claim's ID all the same.
	w.observe(p, old, 499, 500)
	w.observe(p, cur, 0, 501)
	old.Ack(oldTicket)
	close(w.queue)
	got := map[int64]string{}
	for q := range w.queue {
		got[q.sync.SourceOffset] = q.topicID
	}
	if got[0] != "new-topic-id" || got[499] != "old-topic-id" {
		t.Fatalf("syncs name topic IDs %v, want 0 (the new claim's) new-topic-id and 499 (the old claim's late ack) old-topic-id", got)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
