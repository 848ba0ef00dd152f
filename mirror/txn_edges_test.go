package mirror

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestExactlyOnceStopWhileWaitingForTarget stops an exactly-once engine while each
// claim's first record waits for its target topic (the target answers metadata for it
// with LEADER_NOT_AVAILABLE, as in a leader election). The transaction opened for that
// record holds nothing: committing it must not store a source offset the claim never
// reached (it stored 0, and the next engine mirrored every partition again from the
// start: 600 duplicates read_committed).
func TestExactlyOnceStopWhileWaitingForTarget(t *testing.T) {
	const partitions, first, more = 2, 300, 50
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)

	one := startEngine(t, c.exactlyOnceConfig(t), testLogger(t).WithName("first"))
	readTargetCommitted(t, c.target, testTopic, w.total(), time.Second, 2*time.Minute)
	if err := one.stop(t); err != nil {
		t.Fatal(err)
	}
	before := topicEndOffsets(t, c.target, testTopic)

	leaderless := c.target.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: testTopic,
		Err: kerr.LeaderNotAvailable, Count: -1})
	two := startEngine(t, c.exactlyOnceConfig(t), testLogger(t).WithName("second"))
	w.produce(t, c.source, more)
	testutil.WaitFor(t, time.Minute, "every partition waiting for its target topic", func() bool {
		waiting := 0
		for _, p := range two.e.Stats().Partitions {
			if p.Assigned && p.WaitingForTarget {
				waiting++
			}
		}
		return waiting == partitions
	})
	if err := two.stop(t); err != nil {
		t.Fatalf("the stop while waiting for the target returned %v, want nil", err)
	}
	leaderless.Remove()

	three := startEngine(t, c.exactlyOnceConfig(t), testLogger(t).WithName("third"))
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if err := three.stop(t); err != nil {
		t.Fatal(err)
	}
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a stop while waiting for the target: %d records read committed, %d missing, %d duplicates; want %d, 0, 0 (target end offsets before the stop %v)",
			res.records, res.missing, res.duplicates, w.total(), before)
	}
}
