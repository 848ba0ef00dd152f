package mirror

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestLagAfterPartitionComesBack moves a partition from process A to process B, lets B
// commit further, and gives it back to A with no new records: A must report the
// group's offset (B's commit) and lag 0, not the offset it committed itself before the
// move (it kept that one for good, and "wait for lag 0" never ended).
func TestLagAfterPartitionComesBack(t *testing.T) {
	const partitions, first, more = 2, 100, 200
	c := newClusters(t, partitions)
	producePlain(t, c.source, testTopic, partitions, first)
	cfg := func() *config.Config { return c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 }) }

	a := startEngine(t, cfg(), testLogger(t).WithName("a"))
	testutil.WaitFor(t, time.Minute, "A committing every partition at the end", func() bool {
		for _, p := range a.e.Stats().Partitions {
			if p.Committed != first {
				return false
			}
		}
		return len(a.e.Stats().Partitions) == partitions
	})

	b := startEngine(t, cfg(), testLogger(t).WithName("b"))
	var moved int32 = -1
	testutil.WaitFor(t, time.Minute, "a partition moved to B", func() bool {
		for _, p := range b.e.Stats().Partitions {
			if p.Assigned {
				moved = p.Partition
				return true
			}
		}
		return false
	})
	produceTo(t, c, moved, first, more)
	testutil.WaitFor(t, time.Minute, "B committing the moved partition at its new end", func() bool {
		for _, p := range b.e.Stats().Partitions {
			if p.Partition == moved && p.Committed == first+more {
				return true
			}
		}
		return false
	})
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}

	testutil.WaitFor(t, time.Minute, "the partition back at A", func() bool {
		for _, p := range a.e.Stats().Partitions {
			if p.Partition == moved && p.Assigned {
				return true
			}
		}
		return false
	})
	// The committed offset is known at assignment: no commit of A's needs to move it.
	for _, p := range a.e.Stats().Partitions {
		if p.Partition == moved && (p.Committed != first+more || p.Lag != 0) {
			t.Fatalf("partition %d back at A: committed %d, lag %d; want %d and 0 (the group's offset, committed by B)",
				moved, p.Committed, p.Lag, first+more)
		}
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

// produceTo writes n small records to one partition of testTopic, numbered from start.
func produceTo(t *testing.T, c *testClusters, partition int32, start, n int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.source.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := start; i < start+n; i++ {
		recs = append(recs, &kgo.Record{Topic: testTopic, Partition: partition, Value: []byte(strconv.Itoa(i))})
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
