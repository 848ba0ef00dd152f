package mirror

import (
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestCommittedOffsetOutOfRangeStops deletes source records the group has not mirrored
// yet (as retention would) and checks that the engine stops with an error naming the
// partition instead of silently skipping the gap.
func TestCommittedOffsetOutOfRangeStops(t *testing.T) {
	c := newClusters(t, 1)
	w := newWorkload(1)
	w.produce(t, c.source, 1000)
	first := startEngine(t, c.testConfig(t), testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "1000 records committed", func() bool {
		s := first.e.Stats()
		return len(s.Partitions) == 1 && s.Partitions[0].Committed == 1000
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	w.produce(t, c.source, 1000)
	if err := sourceAdmin(t, c).DeleteRecords(testTopic, map[int32]int64{0: 1500}); err != nil {
		t.Fatal(err)
	}

	second := startEngine(t, c.testConfig(t), testLogger(t))
	err := second.wait(t, 30*time.Second)
	if err == nil {
		t.Fatal("Run returned nil although records 1000..1499 were deleted before they were mirrored")
	}
	for _, want := range []string{"source partition orders/0", "out of range", "reset the group's offset"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not contain %q", err, want)
		}
	}
	if got := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, 1)[0]; got != 1000 {
		t.Fatalf("committed offset moved to %d across the gap, want 1000", got)
	}
}
