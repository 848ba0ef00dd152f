package mirror

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

// TestStopIsBoundedWhenTheTargetHangs stops the engine while the target swallows every
// produce request without answering. The drain gives up after the drain timeout, only
// acked offsets are committed, and Run returns within a bounded time.
func TestStopIsBoundedWhenTheTargetHangs(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 1000)
	const drain = 2 * time.Second
	r := startEngine(t, c.testConfig(t), testLogger(t), WithDrainTimeout(drain))
	testutil.WaitFor(t, 60*time.Second, "everything mirrored and committed", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == 1000 && s.Partitions[1].Committed == 1000
	})

	// From now on the target reads produce requests and never answers them.
	c.target.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		return nil, nil, true
	})
	w.produce(t, c.source, 500)
	testutil.WaitFor(t, 60*time.Second, "records in flight", func() bool { return r.e.Stats().InFlight > 0 })

	began := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v after a stop with a hanging target, want nil (nothing failed yet)", err)
	}
	if took := time.Since(began); took > stopCeiling(drain) {
		t.Fatalf("stopping took %v with a hanging target, want it bounded by the drain timeout %v (ceiling %v)", took, drain, stopCeiling(drain))
	}
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, partitions)
	for p := int32(0); p < partitions; p++ {
		if committed[p] != 1000 {
			t.Fatalf("partition %d committed %d; want 1000 (nothing after it was acked)", p, committed[p])
		}
	}
	t.Logf("stopped in %v with a hanging target; committed offsets stayed at the acked 1000 per partition", time.Since(began).Round(time.Millisecond))
}

// recordingListener records what the rebalance listener saw, and on revoke whether the
// revoked partitions were already drained and committed.
type recordingListener struct {
	mu        sync.Mutex
	engine    func() *Engine
	assigned  int
	revoked   int
	undrained []string
}

func (l *recordingListener) OnAssigned(_ context.Context, tps []handler.TopicPartition) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.assigned += len(tps)
	return nil
}

func (l *recordingListener) OnRevoked(_ context.Context, tps []handler.TopicPartition) error {
	e := l.engine()
	stats := map[handler.TopicPartition]PartitionStats{}
	for _, p := range e.Stats().Partitions {
		stats[handler.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revoked += len(tps)
	for _, tp := range tps {
		if s, ok := stats[tp]; ok && s.Consumed >= 0 && s.Committed != s.Consumed {
			l.undrained = append(l.undrained, tp.Topic)
		}
	}
	return nil
}

var testListener = &recordingListener{}

func init() {
	handler.RegisterListener("mirror-test-recorder", func(map[string]string) (handler.RebalanceListener, error) {
		return testListener, nil
	})
}

// TestRebalanceListenerSeesDrainedPartitions checks that the named rebalance listener
// is called on assignment and, on revoke, only after the engine drained and committed.
func TestRebalanceListenerSeesDrainedPartitions(t *testing.T) {
	const partitions = 4
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 1000)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Streams = 1
		cfg.RebalanceListener = &config.PluginSpec{Name: "mirror-test-recorder"}
	})
	r := startEngine(t, cfg, testLogger(t))
	testListener.mu.Lock()
	testListener.engine = func() *Engine { return r.e }
	testListener.mu.Unlock()
	stop := w.background(t, c.source, 200, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "records flowing", func() bool { return r.e.Stats().Records >= 6000 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	stop()
	testListener.mu.Lock()
	defer testListener.mu.Unlock()
	if testListener.assigned != partitions || testListener.revoked != partitions {
		t.Fatalf("listener saw %d assigned and %d revoked partitions, want %d and %d",
			testListener.assigned, testListener.revoked, partitions, partitions)
	}
	if len(testListener.undrained) != 0 {
		t.Fatalf("partitions revoked before they were drained and committed: %v", testListener.undrained)
	}
}
