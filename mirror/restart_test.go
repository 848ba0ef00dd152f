package mirror

import (
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestCleanStopAndRestart stops the engine (as SIGTERM does) while records flow, then
// starts a new one in the same group: nothing is lost and nothing is mirrored twice,
// because the stop drained and committed every partition.
func TestCleanStopAndRestart(t *testing.T) {
	start := time.Now()
	const partitions = 8
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 2000)
	cfg := c.testConfig(t)

	first := startEngine(t, cfg, testLogger(t))
	stopProducing := w.background(t, c.source, 500, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "10k records mirrored", func() bool { return first.e.Stats().Records >= 10_000 })
	if err := first.stop(t); err != nil {
		t.Fatalf("Run after a clean stop = %v, want nil", err)
	}
	s := first.e.Stats()
	for _, p := range s.Partitions {
		if p.Consumed < 0 || p.Committed != p.Consumed {
			t.Fatalf("partition %d: committed %d after the drain, want everything read (%d)", p.Partition, p.Committed, p.Consumed)
		}
	}
	if s.InFlight != 0 {
		t.Fatalf("%d records in flight after a clean stop", s.InFlight)
	}

	second := startEngine(t, c.testConfig(t), testLogger(t))
	time.Sleep(time.Second)
	stopProducing()
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a clean stop and restart: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("clean stop at %d records mirrored, restart: %d records, 0 lost, 0 duplicates, in %v",
		s.Records, res.records, time.Since(start).Round(time.Millisecond))
}

// TestAbruptStopAndRestart kills the engine (no drain, no commit) while records flow and
// restarts it: nothing is lost, and the duplicates of each partition are bounded by what
// was read but not committed at the kill (in flight plus at most one commit interval).
func TestAbruptStopAndRestart(t *testing.T) {
	start := time.Now()
	const partitions = 8
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 2000)

	first := startEngine(t, c.testConfig(t), testLogger(t))
	stopProducing := w.background(t, c.source, 500, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "30k records mirrored and 3 commits", func() bool {
		s := first.e.Stats()
		return s.Records >= 30_000 && s.Commits >= 3
	})
	first.e.Abort()
	if err := first.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	ks := first.e.Stats()
	t.Logf("at the kill: %d records acked, %d in flight, %d commits", ks.Records, ks.InFlight, ks.Commits)
	for _, p := range ks.Partitions {
		t.Logf("partition %d: consumed %d committed %d", p.Partition, p.Consumed, p.Committed)
	}
	bound := map[int32]int64{}
	var totalBound int64
	for _, p := range first.e.Stats().Partitions {
		if p.Consumed >= 0 && p.Committed >= 0 {
			bound[p.Partition] = p.Consumed - p.Committed
		} else if p.Consumed >= 0 {
			bound[p.Partition] = p.Consumed
		}
		totalBound += bound[p.Partition]
	}

	second := startEngine(t, c.testConfig(t), testLogger(t))
	time.Sleep(time.Second)
	stopProducing()
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 {
		t.Fatalf("after an abrupt stop and restart %d records are missing", res.missing)
	}
	for p, d := range res.dupsPerPartition {
		if int64(d) > bound[p] {
			t.Fatalf("partition %d: %d duplicates, more than the %d records read but not committed at the kill", p, d, bound[p])
		}
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("abrupt stop: %d records on the target for %d produced, 0 lost, %d duplicates (bound: %d read but uncommitted), in %v",
		res.records, w.total(), res.duplicates, totalBound, time.Since(start).Round(time.Millisecond))
}

// TestSecondEngineJoinsAndLeaves runs a second engine in the same group that joins and
// later leaves while records flow: both rebalances drain before releasing partitions,
// so nothing is lost or duplicated.
func TestSecondEngineJoinsAndLeaves(t *testing.T) {
	start := time.Now()
	const partitions = 8
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 1000)

	a := startEngine(t, c.testConfig(t), testLogger(t).WithName("a"))
	stopProducing := w.background(t, c.source, 300, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "engine a mirroring", func() bool { return a.e.Stats().Records >= 5_000 })

	b := startEngine(t, c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 }), testLogger(t).WithName("b"))
	testutil.WaitFor(t, 90*time.Second, "engine b owning partitions and mirroring", func() bool {
		return b.e.Stats().Records >= 2_000
	})
	if err := b.stop(t); err != nil {
		t.Fatalf("engine b: %v", err)
	}
	bRecords := b.e.Stats().Records
	aBefore := a.e.Stats().Records
	testutil.WaitFor(t, 90*time.Second, "engine a taking the partitions back", func() bool { return a.e.Stats().Records > aBefore+2_000 })
	stopProducing()

	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a join and a leave: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	as := a.e.Stats()
	if as.Rebalances < 3 {
		t.Fatalf("engine a saw %d group sessions, want at least 3 (start, join, leave)", as.Rebalances)
	}
	if as.Records+bRecords != int64(res.records) {
		t.Fatalf("engines acked %d + %d records, the target holds %d", as.Records, bRecords, res.records)
	}
	t.Logf("join and leave: %d records (a %d, b %d), 0 lost, 0 duplicates, a saw %d sessions, in %v",
		res.records, as.Records, bRecords, as.Rebalances, time.Since(start).Round(time.Millisecond))
}

// TestStatsOfAnAssignmentThatReadNothing restarts an engine on a drained group with no
// new records: each partition's Consumed is where its assignment started (the committed
// offset), not -1, so Consumed - Committed stays a true bound after a late rebalance.
func TestStatsOfAnAssignmentThatReadNothing(t *testing.T) {
	const partitions, perPartition = 2, 50
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, perPartition)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })

	first := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "everything mirrored", func() bool { return first.e.Stats().Records >= int64(w.total()) })
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}

	second := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "both partitions assigned", func() bool {
		n := 0
		for _, p := range second.e.Stats().Partitions {
			if p.Assigned {
				n++
			}
		}
		return n == partitions
	})
	for _, p := range second.e.Stats().Partitions {
		if p.Consumed != perPartition || p.Committed != perPartition {
			t.Errorf("partition %d: consumed %d, committed %d; want both %d (where the assignment started)",
				p.Partition, p.Consumed, p.Committed, perPartition)
		}
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestCommittedAndLagFollowAPartitionThatComesBack is issue 30 item 9: engine x commits
// 100 on both partitions; y joins and takes one of them, mirrors 200 more records of it
// and commits 300; y leaves and the partition comes back to x with nothing new to read.
// x must report what the group holds for it (committed 300, lag 0), not its own last
// commit of the partition (100, lag 200 for good: the runbook's "wait for lag 0" never
// ended).
func TestCommittedAndLagFollowAPartitionThatComesBack(t *testing.T) {
	const partitions, first, more = 2, 100, 200
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	committedEverywhere := func(r *runningEngine, want int64, assigned int) func() bool {
		return func() bool {
			n := 0
			for _, p := range r.e.Stats().Partitions {
				if p.Assigned && p.Committed == want {
					n++
				}
			}
			return n == assigned
		}
	}

	x := startEngine(t, cfg, testLogger(t).WithName("x"))
	testutil.WaitFor(t, 60*time.Second, "x committing both partitions at 100", committedEverywhere(x, first, partitions))

	y := startEngine(t, cfg, testLogger(t).WithName("y"))
	groupStable(t, c.source, cfg.ConsumerGroup, 2, 60*time.Second)
	var moved int32 = -1
	testutil.WaitFor(t, 60*time.Second, "y owning one partition", func() bool {
		for _, p := range y.e.Stats().Partitions {
			if p.Assigned {
				moved = p.Partition
				return true
			}
		}
		return false
	})
	// Only the partition that moved grows: the one x kept stays at 100.
	w.produceTo(t, c.source, moved, more)
	testutil.WaitFor(t, 60*time.Second, "y committing the moved partition at 300", committedEverywhere(y, first+more, 1))
	if err := y.stop(t); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "x owning both partitions again", func() bool {
		n := 0
		for _, p := range x.e.Stats().Partitions {
			if p.Assigned {
				n++
			}
		}
		return n == partitions
	})
	want := func(p int32) int64 {
		if p == moved {
			return first + more
		}
		return first
	}
	testutil.WaitFor(t, 30*time.Second, "x to have fetched both high watermarks", func() bool {
		for _, p := range x.e.Stats().Partitions {
			if p.HighWatermark != want(p.Partition) {
				return false
			}
		}
		return true
	})
	group := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions)
	for _, p := range x.e.Stats().Partitions {
		if group[p.Partition] != want(p.Partition) {
			t.Fatalf("partition %d: group offset %d, want %d", p.Partition, group[p.Partition], want(p.Partition))
		}
		if want := want(p.Partition); p.Committed != want || p.Lag != 0 {
			t.Errorf("partition %d back with x: committed %d, lag %d; want committed %d (the group's offset) and lag 0",
				p.Partition, p.Committed, p.Lag, want)
		}
	}
	if err := x.stop(t); err != nil {
		t.Fatal(err)
	}
}
