package mirror

import (
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestMirrorEndToEnd mirrors 100k records over 8 partitions, half written before the
// engine starts and half while it runs, and checks every record: same partition, same
// order, key, value (with nulls), headers and timestamp, counted exactly.
func TestMirrorEndToEnd(t *testing.T) {
	start := time.Now()
	const partitions, perPartition = 8, 12_500
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, perPartition/2)

	r := startEngine(t, c.testConfig(t), testLogger(t))
	w.produce(t, c.source, perPartition/2)

	got := readTarget(t, c.target, testTopic, w.total(), time.Second, 45*time.Second)
	res := audit(t, w, got, true, true)
	if res.records != 100_000 || res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("target holds %d records, %d missing, %d duplicates; want 100000, 0, 0", res.records, res.missing, res.duplicates)
	}
	testutil.WaitFor(t, 90*time.Second, "every offset committed", func() bool {
		s := r.e.Stats()
		for _, p := range s.Partitions {
			if p.Committed != perPartition {
				return false
			}
		}
		return len(s.Partitions) == partitions
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run returned %v after a clean stop", err)
	}
	s := r.e.Stats()
	if s.Records != 100_000 || s.InFlight != 0 || s.Lag != 0 {
		t.Fatalf("stats: records %d, in flight %d, lag %d; want 100000, 0, 0", s.Records, s.InFlight, s.Lag)
	}
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, partitions)
	for p := int32(0); p < partitions; p++ {
		if committed[p] != perPartition {
			t.Fatalf("partition %d committed %d, want %d", p, committed[p], perPartition)
		}
	}
	t.Logf("mirrored %d records over %d partitions, 0 lost, 0 duplicates, in %v", res.records, partitions, time.Since(start).Round(time.Millisecond))
}
