package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// produceTransactions writes, per transaction, perPartition records to every partition of
// testTopic from a transactional franz-go producer and commits or aborts it as commits
// says. Record values are "t<transaction>-<partition>-<i>".
func produceTransactions(t *testing.T, c *testClusters, partitions int32, perPartition int, commits []bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.source.ListenAddrs()...), kgo.TransactionalID("source-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for txn, commit := range commits {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < perPartition; i++ {
				recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p, Value: []byte(fmt.Sprintf("t%d-%d-%d", txn, p, i))})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLagReachesZeroAfterTransactions writes the source in transactions, the last one
// aborted: every transaction leaves a marker the consumer never delivers, and the last
// one also 20 aborted records per partition. Once mirrored, the engine's commit point
// must reach each partition's end offset (past the markers and the aborted records),
// Stats must show lag 0, and the target must hold exactly the committed records.
func TestLagReachesZeroAfterTransactions(t *testing.T) {
	const (
		partitions   = 2
		perPartition = 20
	)
	commits := []bool{true, true, false, true, false}
	c := newClusters(t, partitions)
	produceTransactions(t, c, partitions, perPartition, commits)
	ends := topicEndOffsets(t, c.source, testTopic)
	for p, end := range ends {
		// Each transaction takes perPartition offsets and one for its marker.
		if want := int64(len(commits) * (perPartition + 1)); end != want {
			t.Fatalf("source partition %d ends at %d, want %d", p, end, want)
		}
	}
	committed := 0
	for _, ok := range commits {
		if ok {
			committed++
		}
	}

	r := startEngine(t, c.testConfig(t), testLogger(t))
	got := readTarget(t, c.target, testTopic, partitions*committed*perPartition, time.Second, 30*time.Second)
	for p := int32(0); p < partitions; p++ {
		if n := len(got[p]); n != committed*perPartition {
			t.Fatalf("target partition %d holds %d records, want the %d committed ones", p, n, committed*perPartition)
		}
		for _, rec := range got[p] {
			var txn int
			if _, err := fmt.Sscanf(string(rec.Value), "t%d-", &txn); err != nil || !commits[txn] || !strings.HasPrefix(string(rec.Value), fmt.Sprintf("t%d-%d-", txn, p)) {
				t.Fatalf("target partition %d holds %q, which is not a committed record of that partition", p, rec.Value)
			}
		}
	}
	testutil.WaitFor(t, 20*time.Second, "the commit point at every partition's end offset and lag 0", func() bool {
		s := r.e.Stats()
		if len(s.Partitions) != partitions || s.Lag != 0 {
			return false
		}
		for _, ps := range s.Partitions {
			if ps.Committed != ends[ps.Partition] || ps.Lag != 0 {
				return false
			}
		}
		return true
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if off := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, partitions); off[0] != ends[0] || off[1] != ends[1] {
		t.Fatalf("source group committed %v, want the end offsets %v", off, ends)
	}
	t.Logf("%d transactions (%d aborted) of %d records per partition: committed offsets %v = end offsets, lag 0",
		len(commits), len(commits)-committed, perPartition, ends)
}

// TestCommitPointStopsAtAnOpenTransaction leaves a source transaction open after a
// committed one: the commit point may pass the committed transaction's marker but must
// stop at the open transaction's first record (the last stable offset), and once that
// transaction commits, its records are mirrored and the commit point reaches the end.
func TestCommitPointStopsAtAnOpenTransaction(t *testing.T) {
	const perTxn = 20
	c := newClusters(t, 1)
	produceTransactions(t, c, 1, perTxn, []bool{true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.source.ListenAddrs()...), kgo.TransactionalID("open-txn"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < perTxn; i++ {
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: []byte(fmt.Sprintf("open-%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Offsets: 0-19 committed records, 20 their marker, 21-40 the open transaction.
	const lastStable = perTxn + 1

	cfg := c.testConfig(t)
	r := startEngine(t, cfg, testLogger(t))
	committedAt := func() int64 {
		s := r.e.Stats()
		if len(s.Partitions) != 1 {
			return -1
		}
		return s.Partitions[0].Committed
	}
	testutil.WaitFor(t, 20*time.Second, "the commit point past the first transaction's marker", func() bool { return committedAt() == lastStable })
	// Three more commit intervals: the commit point must not pass the open transaction.
	time.Sleep(3 * cfg.OffsetCommitInterval.Duration)
	if got := committedAt(); got != lastStable {
		t.Fatalf("commit point %d while a transaction is open from offset %d", got, lastStable)
	}
	if got := readTarget(t, c.target, testTopic, perTxn, time.Second, 20*time.Second); len(got[0]) != perTxn {
		t.Fatalf("target holds %d records while the second transaction is open, want %d", len(got[0]), perTxn)
	}

	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	end := 2 * (perTxn + 1)
	testutil.WaitFor(t, 20*time.Second, "the commit point at the end after the commit", func() bool { return committedAt() == int64(end) })
	if got := readTarget(t, c.target, testTopic, 2*perTxn, time.Second, 20*time.Second); len(got[0]) != 2*perTxn {
		t.Fatalf("target holds %d records after both transactions committed, want %d", len(got[0]), 2*perTxn)
	}
	if s := r.e.Stats(); s.Lag != 0 {
		t.Fatalf("lag %d after everything was mirrored", s.Lag)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
