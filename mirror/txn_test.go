package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// exactlyOnceConfig is the test config with delivery exactlyOnce.
func (c *testClusters) exactlyOnceConfig(t testing.TB, mutate ...func(*config.Config)) *config.Config {
	t.Helper()
	return c.testConfig(t, append([]func(*config.Config){func(cfg *config.Config) {
		cfg.Delivery = config.DeliveryExactlyOnce
		cfg.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
	}}, mutate...)...)
}

// TestExactlyOnceCrashes kills the engine (no drain, no commit, its open transactions
// left open) three times while records flow, restarting it each time, and more times
// until a kill left a transaction open: a read_committed reader of the target sees every
// source record exactly once.
func TestExactlyOnceCrashes(t *testing.T) {
	start := time.Now()
	const partitions = 4
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 1000)
	stopProducing := w.background(t, c.source, 200, 20*time.Millisecond)
	defer func() {
		if stopProducing != nil {
			stopProducing()
		}
	}()

	var txns, killedAt, leftOpen int64 // over all killed engines
	// Three kills, and more (up to ten) until one lands with a transaction open: on a
	// machine whose cores are all busy an abort can come between two transactions
	// three times in a row (seen once at load 32).
	for kill := 1; kill <= 3 || (leftOpen == 0 && kill <= 10); kill++ {
		r := startEngine(t, c.exactlyOnceConfig(t), testLogger(t))
		testutil.WaitFor(t, 60*time.Second, "3000 more records committed in transactions", func() bool {
			return r.e.Stats().Records >= 3000 && r.e.txn.committed.Load() >= 10
		})
		r.e.Abort()
		if err := r.wait(t, 30*time.Second); err != nil {
			t.Fatalf("Run after Abort = %v, want nil", err)
		}
		s := r.e.Stats()
		killedAt += s.Records
		txns += r.e.txn.committed.Load()
		leftOpen += r.e.txn.leftOpen.Load()
		t.Logf("kill %d: %d records committed in %d transactions before the kill, %d transactions left open",
			kill, s.Records, r.e.txn.committed.Load(), r.e.txn.leftOpen.Load())
	}
	if leftOpen == 0 {
		t.Fatal("no kill left a transaction open: the test did not kill mid-transaction")
	}
	last := startEngine(t, c.exactlyOnceConfig(t), testLogger(t))
	time.Sleep(time.Second)
	stopProducing()
	stopProducing = nil
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after 3 kills: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if err := last.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 kills, %d transactions committed before them and %d left open: %d records, 0 lost, 0 duplicates, in %v",
		txns, leftOpen, res.records, time.Since(start).Round(time.Millisecond))
}

// TestExactlyOnceTakeover runs two members; one is killed while records flow and the
// other takes its partitions over: the killed member's open transactions never become
// visible (they would show as duplicates), nothing is lost.
func TestExactlyOnceTakeover(t *testing.T) {
	const partitions = 6
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	stopProducing := w.background(t, c.source, 100, 20*time.Millisecond)

	cfg := func() *config.Config { return c.exactlyOnceConfig(t, func(cfg *config.Config) { cfg.Streams = 1 }) }
	a := startEngine(t, cfg(), testLogger(t).WithName("a"))
	b := startEngine(t, cfg(), testLogger(t).WithName("b"))
	testutil.WaitFor(t, 60*time.Second, "both members committing transactions", func() bool {
		return a.e.txn.committed.Load() >= 5 && b.e.txn.committed.Load() >= 5
	})
	a.e.Abort()
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	aRecords, aOpen := a.e.Stats().Records, a.e.txn.leftOpen.Load()
	bBefore := b.e.txn.committed.Load()
	testutil.WaitFor(t, 60*time.Second, "the survivor committing every partition", func() bool {
		s := b.e.Stats()
		assigned := 0
		for _, p := range s.Partitions {
			if p.Assigned {
				assigned++
			}
		}
		return assigned == partitions && b.e.txn.committed.Load() >= bBefore+2*partitions
	})
	stopProducing()
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a takeover: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed member committed %d records and left %d transactions open; survivor took over: %d records read committed, 0 lost, 0 duplicates",
		aRecords, aOpen, res.records)
}

// TestExactlyOnceScale scales the mirror from 1 to 3 processes and back to 1 while
// records flow (every step a rebalance, the removed processes stopped cleanly, the last
// one of each step killed): a read_committed reader sees every record exactly once.
func TestExactlyOnceScale(t *testing.T) {
	const partitions = 6
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	stopProducing := w.background(t, c.source, 100, 20*time.Millisecond)
	cfg := func() *config.Config { return c.exactlyOnceConfig(t, func(cfg *config.Config) { cfg.Streams = 1 }) }
	committing := func(r *runningEngine, n int64) {
		t.Helper()
		from := r.e.txn.committed.Load()
		testutil.WaitFor(t, 60*time.Second, "transactions committed", func() bool { return r.e.txn.committed.Load() >= from+n })
	}
	first := startEngine(t, cfg(), testLogger(t).WithName("1"))
	committing(first, 5)
	second := startEngine(t, cfg(), testLogger(t).WithName("2"))
	third := startEngine(t, cfg(), testLogger(t).WithName("3"))
	committing(second, 3)
	committing(third, 3)
	// Back to one: the second stops cleanly, the third is killed.
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	third.e.Abort()
	if err := third.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	testutil.WaitFor(t, 60*time.Second, "the last process owning every partition", func() bool {
		assigned := 0
		for _, p := range first.e.Stats().Partitions {
			if p.Assigned {
				assigned++
			}
		}
		return assigned == partitions
	})
	committing(first, 2*partitions)
	stopProducing()
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after scaling 1 -> 3 -> 1: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("scaled 1 -> 3 -> 1 (one clean stop, one kill): %d records, 0 lost, 0 duplicates", res.records)
}

// TestExactlyOnceZombieFenced is the fencing step on its own: a producer that was
// writing a source partition's transaction (a paused process) is fenced when the
// partition's new owner opens the same transactional id; its transaction can no longer
// be committed, none of its records becomes visible, and the offset it tried to commit
// is not written. The new owner's transaction is.
func TestExactlyOnceZombieFenced(t *testing.T) {
	c := newClusters(t, 1)
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	adm, err := sarama.NewClusterAdmin(c.target.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(testTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	e, err := New(c.exactlyOnceConfig(t), WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	e.keeper = &progressKeeper{group: ProgressGroup(e.cfg.ConsumerGroup)}
	tp := partitionKey{testTopic, 0}
	send := func(w *txnWriter, who string, n int) {
		t.Helper()
		if err := w.producer.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			w.producer.Input() <- &sarama.ProducerMessage{Topic: testTopic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", who, i))}
		}
	}
	commit := func(w *txnWriter, next int64) error {
		meta := txnProgressMetadata(testTopic, 0)
		if err := w.producer.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{
			testTopic: {{Partition: 0, Offset: next, LeaderEpoch: -1, Metadata: &meta}}}, e.keeper.group); err != nil {
			return err
		}
		return w.producer.CommitTxn()
	}

	zombie, err := openTxnWriter(context.Background(), e, tp)
	if err != nil {
		t.Fatal(err)
	}
	send(zombie, "zombie", 10)
	// The zombie's records reach the target inside its open transaction.
	testutil.WaitFor(t, 30*time.Second, "the zombie's records written", func() bool {
		zombie.mu.Lock()
		defer zombie.mu.Unlock()
		return zombie.acked == 10
	})
	owner, err := openTxnWriter(context.Background(), e, tp)
	if err != nil {
		t.Fatal(err)
	}
	zerr := commit(zombie, 10)
	if zerr == nil {
		t.Fatal("the zombie committed its transaction after the new owner opened the same transactional id")
	}
	if !errors.Is(zerr, sarama.ErrProducerFenced) && !errors.Is(zerr, sarama.ErrInvalidProducerEpoch) {
		t.Fatalf("the zombie's commit failed with %v, want PRODUCER_FENCED (90) or INVALID_PRODUCER_EPOCH", zerr)
	}
	zombie.close()
	send(owner, "owner", 3)
	if err := commit(owner, 3); err != nil {
		t.Fatalf("the new owner's commit: %v", err)
	}
	owner.close()

	got := readTargetCommitted(t, c.target, testTopic, 3, time.Second, time.Minute)
	if n := len(got[0]); n != 3 {
		t.Fatalf("read_committed sees %d records, want the new owner's 3 (the zombie's 10 aborted)", n)
	}
	for _, r := range got[0] {
		if !strings.HasPrefix(string(r.Value), "owner-") {
			t.Fatalf("read_committed sees the zombie's record %q", r.Value)
		}
	}
	offs, err := adm.ListConsumerGroupOffsets(e.keeper.group, map[string][]int32{testTopic: {0}})
	if err != nil {
		t.Fatal(err)
	}
	o := offs.GetBlock(testTopic, 0)
	if o == nil || o.Offset != 3 || o.Metadata != txnProgressMetadata(testTopic, 0) {
		t.Fatalf("target-side offset = %+v, want the new owner's 3 with its metadata", o)
	}
	t.Logf("zombie fenced: its commit failed with PRODUCER_FENCED (%q, as sarama names code 90); read_committed sees the new owner's 3 records and offset 3", zerr)
}

// TestExactlyOnceTargetOutage cuts the target off for a few seconds while records flow:
// transactions wait for the target (sarama retries for deliveryTimeout), and a
// read_committed reader sees every record exactly once.
func TestExactlyOnceTargetOutage(t *testing.T) {
	const partitions = 4
	f := newFaultyNetwork()
	c := newClusters(t, partitions, f.opt())
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout = config.Duration{Duration: 20 * time.Second} })
	r := startEngine(t, cfg, testLogger(t))
	stopProducing := w.background(t, c.source, 100, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "transactions committed", func() bool { return r.e.txn.committed.Load() >= 10 })
	f.setCut(true)
	time.Sleep(5 * time.Second)
	f.setCut(false)
	before := r.e.txn.committed.Load()
	testutil.WaitFor(t, 90*time.Second, "transactions committed after the outage", func() bool {
		return r.e.txn.committed.Load() >= before+2*partitions
	})
	stopProducing()
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a 5 s target outage: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v after the outage, want nil", err)
	}
	if n := r.e.txn.failed.Load(); n != 0 {
		t.Fatalf("%d transactions failed during a 5 s outage, want 0 (they retry for deliveryTimeout, 20 s)", n)
	}
	// Every committed record is counted once its ack was read, even one whose ack
	// reached the ack reader after CommitTxn returned.
	if n := r.e.Stats().Records; n != int64(res.records) {
		t.Fatalf("the engine counted %d records mirrored, the target holds %d (each once)", n, res.records)
	}
	t.Logf("5 s target outage: %d transactions failed; %d records, 0 lost, 0 duplicates",
		r.e.txn.failed.Load(), res.records)
}

// TestExactlyOnceGroupFailover is TestGroupCheckpointsFailover in exactly-once mode,
// with a kill: a source application group reads part of a topic written in
// transactions (aborted ones and markers leave offset gaps) and commits; the mirror runs
// with a 25% filter and translates the group, is killed while records flow (its open
// transactions left open) and restarted. Every offset sync it wrote names a record a
// read_committed reader sees (a sync is written only for a committed transaction), the
// translation of the source group's offset is exact, and a read_committed consumer
// moved to the target at the translated offsets reads every record after the source
// group's position exactly once: 0 skipped, 0 duplicates.
func TestExactlyOnceGroupFailover(t *testing.T) {
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

	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) {
		cfg.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}
		cfg.Groups = &config.Groups{Include: []string{group}, SyncInterval: config.Duration{Duration: syncEvery}}
	})
	first := startEngine(t, cfg, testLogger(t).WithName("first"))
	waitForCheckpoint(t, cfg, group, partitions)
	// More records while the first mirror runs; it is killed right after a source
	// transaction, once it committed a few of its own meanwhile (so most likely with
	// one open) and wrote more offset syncs than a store keeps per partition: the
	// syncs around the source group's old position must outlive the thinning of the
	// older ones (a translation of 33 for 38 before they were pinned, see
	// TestIdleGroupTranslationStaysExactPastTheSyncBound).
	from := first.e.txn.committed.Load()
	deadline := time.Now().Add(60 * time.Second)
	for first.e.txn.committed.Load() < from+3 || first.e.Stats().OffsetSyncs <= partitions*(maxOffsetSyncsPerPartition+100) {
		if time.Now().After(deadline) {
			t.Fatalf("the first mirror committed %d transactions and wrote %d offset syncs in 60 s while records flowed, want 3 and over %d",
				first.e.txn.committed.Load()-from, first.e.Stats().OffsetSyncs, partitions*(maxOffsetSyncsPerPartition+100))
		}
		src.produce(t, 1, 13)
	}
	first.e.Abort()
	if err := first.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	firstSyncs, leftOpen := first.e.Stats().OffsetSyncs, first.e.txn.leftOpen.Load()
	src.produce(t, 6, 13)

	second := startEngine(t, cfg, testLogger(t).WithName("second"))
	passing := 0
	for p := range int32(partitions) {
		passing += len(src.passing[p])
	}
	got := readTargetCommitted(t, c.target, testTopic, passing, 2*time.Second, 2*time.Minute)
	waitForCheckpoint(t, cfg, group, partitions)
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := second.e.Stats(); s.OffsetSyncs == 0 || s.OffsetSyncsDropped != 0 || firstSyncs == 0 {
		t.Fatalf("offset syncs written %d before the kill, %d after, %d dropped: want some, some, none", firstSyncs, s.OffsetSyncs, s.OffsetSyncsDropped)
	}

	// Every sync names a record a read_committed reader sees.
	visibleAt := map[int32]map[int64]bool{}
	for p, recs := range got {
		visibleAt[p] = map[int64]bool{}
		for _, r := range recs {
			visibleAt[p][r.Offset] = true
		}
	}
	syncRecs := readTarget(t, c.target, OffsetSyncTopic(cfg.ConsumerGroup), 1, time.Second, 30*time.Second)
	nSyncs := 0
	for _, r := range syncRecs[0] {
		tp, kerr := parseOffsetSyncKey(r.Key)
		s, _, verr := decodeOffsetSync(r.Value)
		if err := errors.Join(kerr, verr); err != nil {
			t.Fatal(err)
		}
		if !visibleAt[tp.partition][s.TargetOffset] {
			t.Fatalf("offset sync %+v of %v names target offset %d, which no read_committed reader sees (an aborted or open transaction's record)", s, tp, s.TargetOffset)
		}
		nSyncs++
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

	// The moved group reads (read_committed) from its translated offsets: the records
	// at or after them of what a read_committed reader sees. The whole topic holds each
	// passing record once.
	missing, duplicates, wholeDuplicates := 0, 0, 0
	for p := range int32(partitions) {
		once, after := map[int]bool{}, map[int]bool{}
		for _, r := range got[p] {
			_, i := recordID(t, r)
			if !src.passing[p][i] {
				t.Fatalf("partition %d: the target holds record %d, which the mirror must not have written", p, i)
			}
			if once[i] {
				wholeDuplicates++
			}
			once[i] = true
			if r.Offset < targetCommitted[p] {
				continue
			}
			if after[i] || appSeen[p][i] {
				duplicates++
			}
			after[i] = true
		}
		for i := range src.passing[p] {
			if !appSeen[p][i] && !after[i] {
				missing++
				t.Errorf("partition %d: record %d was after the source group's position and the moved group never read it", p, i)
			}
		}
	}
	t.Logf("killed once (%d transactions left open); %d offset syncs, each naming a committed record; moved group starts at %v: missing %d, duplicates %d, duplicates in the whole topic %d",
		leftOpen, nSyncs, targetCommitted, missing, duplicates, wholeDuplicates)
	if missing != 0 || duplicates != 0 || wholeDuplicates != 0 {
		t.Fatalf("missing %d, duplicates %d after the translated offsets, %d in the whole topic: want 0, 0, 0", missing, duplicates, wholeDuplicates)
	}
}
