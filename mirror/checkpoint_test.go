package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// failoverSource writes records to testTopic in transactions, every third aborted,
// each record with header "id" = "<partition>/<i>" and every fourth with a "skip"
// header (the mirror's filter drops those: 25%). It remembers, per partition, the ids
// a read_committed consumer sees, in order.
type failoverSource struct {
	client  *kgo.Client
	next    []int
	visible map[int32][]int // committed ids, in offset order
	passing map[int32]map[int]bool
	txns    int
}

func newFailoverSource(t *testing.T, cl *kfake.Cluster, partitions int32) *failoverSource {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.TransactionalID("failover-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s := &failoverSource{client: client, next: make([]int, partitions), visible: map[int32][]int{}, passing: map[int32]map[int]bool{}}
	for p := int32(0); p < partitions; p++ {
		s.passing[p] = map[int]bool{}
	}
	return s
}

// produce writes txns transactions of perPartition records per partition.
func (s *failoverSource) produce(t *testing.T, txns, perPartition int) {
	t.Helper()
	ctx := context.Background()
	for range txns {
		commit := s.txns%3 != 2
		s.txns++
		if err := s.client.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range int32(len(s.next)) {
			for range perPartition {
				i := s.next[p]
				s.next[p]++
				r := &kgo.Record{Topic: testTopic, Partition: p, Value: []byte(fmt.Sprintf("v%d", i)),
					Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(fmt.Sprintf("%d/%d", p, i))}}}
				if i%4 == 0 {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: "skip", Value: []byte("1")})
				}
				recs = append(recs, r)
				if commit {
					s.visible[p] = append(s.visible[p], i)
					if i%4 != 0 {
						s.passing[p][i] = true
					}
				}
			}
		}
		if err := s.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := s.client.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}

// consumeAndCommit is an application in group on cl: it reads (read_committed) until
// it has read at least n records, commits what it read and leaves the group. It
// returns the ids read per partition.
func consumeAndCommit(t *testing.T, cl *kfake.Cluster, group string, n int) map[int32]map[int]bool {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	seen := map[int32]map[int]bool{}
	read := 0
	deadline := time.Now().Add(30 * time.Second)
	for read < n {
		if time.Now().After(deadline) {
			t.Fatalf("group %q read %d records in 30s, want %d", group, read, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := client.PollRecords(ctx, 7)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if seen[r.Partition] == nil {
				seen[r.Partition] = map[int]bool{}
			}
			_, i := recordID(t, r)
			seen[r.Partition][i] = true
			read++
		})
	}
	if err := client.CommitUncommittedOffsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	return seen
}

// targetMembers returns the number of members of group on cl.
func targetMembers(t *testing.T, cl *kfake.Cluster, group string) int {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	d, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil || len(d) != 1 {
		t.Fatalf("describing group %q: %v", group, err)
	}
	return len(d[0].Members)
}

// waitForCheckpoint waits until the target group holds the translation of every
// partition the source group committed, as the offset syncs written so far give it: the
// engine's checkpoints caught up with the syncs of the records mirrored.
func waitForCheckpoint(t *testing.T, cfg *config.Config, group string, partitions int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		tr, err := TranslateGroup(context.Background(), cfg, group, false)
		if err != nil {
			return err
		}
		if len(tr.Partitions) != partitions {
			return fmt.Errorf("%d partitions translated, want %d", len(tr.Partitions), partitions)
		}
		for _, pt := range tr.Partitions {
			if pt.TargetOffset < 0 || pt.TargetOffset != pt.TargetCommitted {
				return fmt.Errorf("partition %d translates to %d, the target group holds %d", pt.Partition, pt.TargetOffset, pt.TargetCommitted)
			}
		}
		return nil
	})
}

// TestGroupCheckpointsFailover is issue 13's failover test. A source application group
// reads part of a topic written in transactions (aborted ones and markers leave offset
// gaps) and commits; the mirror runs with a 25% filter and translates the group. While
// a consumer of the same group is active on the target, its offsets are left alone;
// once it leaves, the translated offsets are committed. A consumer started on the target
// in that group then reads every record after the source group's position (none
// skipped), and nothing before it (duplicates 0: the translation is exact).
func TestGroupCheckpointsFailover(t *testing.T) {
	const (
		partitions = 2
		group      = "app"
		syncEvery  = 300 * time.Millisecond
	)
	c := newClusters(t, partitions, kfake.SeedTopics(partitions, testTopic))
	src := newFailoverSource(t, c.source, partitions)
	src.produce(t, 6, 13)
	visible := len(src.visible[0]) + len(src.visible[1])
	appSeen := consumeAndCommit(t, c.source, group, visible/2)
	src.produce(t, 6, 13)
	appOffsets := testutil.CommittedOffsets(t, c.source.ListenAddrs(), group, testTopic, partitions)
	t.Logf("source group %q committed %v after reading %d of %d visible records", group, appOffsets, len(appSeen[0])+len(appSeen[1]), visible)

	// A consumer of the group is active on the target before the mirror starts.
	member, err := kgo.NewClient(kgo.SeedBrokers(c.target.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	memberClosed := false
	defer func() {
		if !memberClosed {
			member.Close()
		}
	}()
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := member.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	testutil.WaitFor(t, 20*time.Second, "the target member to join", func() bool { return targetMembers(t, c.target, group) == 1 })

	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}
		cfg.Groups = &config.Groups{Include: []string{"app.*"}, Exclude: []string{"app-tmp"}, SyncInterval: config.Duration{Duration: syncEvery}}
	})
	r := startEngine(t, cfg, testLogger(t))
	passing := len(src.passing[0]) + len(src.passing[1])
	readTarget(t, c.target, testTopic, passing, time.Second, 60*time.Second)
	groupStats := func() GroupStats {
		for _, g := range r.e.Stats().Groups {
			if g.Group == group {
				return g
			}
		}
		return GroupStats{}
	}
	testutil.WaitFor(t, 30*time.Second, "two checkpoints skipped for the active target group", func() bool { return groupStats().SkippedActive >= 2 })
	if got := testutil.CommittedOffsets(t, c.target.ListenAddrs(), group, testTopic, partitions); got[0] != -1 || got[1] != -1 {
		t.Fatalf("the active target group was moved: committed %v", got)
	}

	memberClosed = true
	member.Close()
	waitForCheckpoint(t, cfg, group, partitions)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	s := r.e.Stats()
	if s.OffsetSyncsDropped != 0 || s.OffsetSyncs == 0 {
		t.Fatalf("offset syncs written %d, dropped %d: want some, none dropped", s.OffsetSyncs, s.OffsetSyncsDropped)
	}
	g := groupStats()
	if g.PartitionsTranslated != partitions || g.SkippedBackwards != 0 {
		t.Fatalf("group stats %+v: want %d partitions translated, none moved back", g, partitions)
	}
	tr, err := TranslateGroup(context.Background(), cfg, group, false)
	if err != nil {
		t.Fatal(err)
	}
	targetCommitted := testutil.CommittedOffsets(t, c.target.ListenAddrs(), group, testTopic, partitions)
	for _, pt := range tr.Partitions {
		if !pt.Exact || pt.SourceOffset != appOffsets[pt.Partition] || pt.TargetOffset != targetCommitted[pt.Partition] {
			t.Fatalf("translation %+v: want exact, from the source group's %d, as committed on the target (%d)",
				pt, appOffsets[pt.Partition], targetCommitted[pt.Partition])
		}
	}

	// The consumers move: the group reads the target from its translated offsets.
	moved, err := kgo.NewClient(kgo.SeedBrokers(c.target.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	ends := topicEndOffsets(t, c.target, testTopic)
	readAfter := map[int32][]int{}
	pos := map[int32]int64{0: targetCommitted[0], 1: targetCommitted[1]}
	deadline := time.Now().Add(30 * time.Second)
	for pos[0] < ends[0] || pos[1] < ends[1] {
		if time.Now().After(deadline) {
			t.Fatalf("the moved group read up to %v in 30s, target ends at %v", pos, ends)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := moved.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			_, i := recordID(t, r)
			readAfter[r.Partition] = append(readAfter[r.Partition], i)
			pos[r.Partition] = r.Offset + 1
		})
	}

	missing, duplicates := 0, 0
	for p := int32(0); p < partitions; p++ {
		got := map[int]bool{}
		for _, i := range readAfter[p] {
			if !src.passing[p][i] {
				t.Fatalf("partition %d: the moved group read record %d, which the mirror must not have written", p, i)
			}
			if got[i] || appSeen[p][i] {
				duplicates++
			}
			got[i] = true
		}
		for i := range src.passing[p] {
			if !appSeen[p][i] && !got[i] {
				missing++
				t.Errorf("partition %d: record %d was after the source group's position and the moved group never read it", p, i)
			}
		}
	}
	t.Logf("moved group read %d records from %v; missing %d, duplicates %d", len(readAfter[0])+len(readAfter[1]), targetCommitted, missing, duplicates)
	if missing != 0 || duplicates != 0 {
		t.Fatalf("missing %d, duplicates %d: want 0 and 0 (an exact translation repeats nothing)", missing, duplicates)
	}

	// The moved consumers commit their progress on the target and stop: a translation
	// of the (stale) source group must not move them back.
	if err := moved.CommitUncommittedOffsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	moved.Close()
	after, err := TranslateGroup(context.Background(), cfg, group, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range after.Partitions {
		if pt.Committed || pt.Skipped != skipBackwards || pt.TargetCommitted != ends[pt.Partition] {
			t.Fatalf("translation %+v after the moved group committed %v: want it left alone (skipped: %s)", pt, ends, skipBackwards)
		}
	}
}

// TestCheckpointAfterCrashSkipsNothing crashes the mirror (Abort: acked records not
// committed, so the restarted mirror writes them again, later on the target) while
// offset syncs are being written, and restarts it with more records to mirror. The translation of the source
// group's offset must still skip nothing: a consumer moved to the target reads every
// record after the source group's position; the records it reads twice are counted and
// bounded by what the first run mirrored.
func TestCheckpointAfterCrashSkipsNothing(t *testing.T) {
	const (
		partitions   = 2
		perPartition = 400
		group        = "app"
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, perPartition)
	appSeen := consumeAndCommit(t, c.source, group, perPartition)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{group}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	})

	first := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 30*time.Second, "a third of the records mirrored", func() bool {
		return first.e.Stats().Records >= partitions*perPartition/3
	})
	first.e.Abort()
	if err := first.wait(t, stopCeiling(testDrainTimeout)); err != nil {
		t.Fatal(err)
	}
	firstRecords := first.e.Stats().Records
	<-first.e.Closed()
	w.produce(t, c.source, perPartition/2)

	second := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "the restarted mirror to catch up", func() bool {
		s := second.e.Stats()
		return s.Lag == 0 && s.InFlight == 0 && s.Records+firstRecords >= int64(w.total())
	})
	waitForCheckpoint(t, cfg, group, partitions)
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	targetCommitted := testutil.CommittedOffsets(t, c.target.ListenAddrs(), group, testTopic, partitions)
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, 30*time.Second)
	missing, duplicates := 0, 0
	for p := int32(0); p < partitions; p++ {
		read := map[int]int{}
		for _, r := range got[p] {
			if r.Offset < targetCommitted[p] {
				continue
			}
			_, i := recordID(t, r)
			read[i]++
			if read[i] > 1 || appSeen[p][i] {
				duplicates++
			}
		}
		for i := 0; i < w.next[p]; i++ {
			if !appSeen[p][i] && read[i] == 0 {
				missing++
				t.Errorf("partition %d: record %d was after the source group's position and is not after the translated offset %d", p, i, targetCommitted[p])
			}
		}
	}
	t.Logf("first run mirrored %d records before the crash; target holds %d, %d; moved group starts at %v: missing %d, duplicates %d",
		firstRecords, len(got[0]), len(got[1]), targetCommitted, missing, duplicates)
	if missing != 0 || int64(duplicates) > firstRecords {
		t.Fatalf("missing %d, duplicates %d: want none missing and at most the %d records of the first run again", missing, duplicates, firstRecords)
	}
}
