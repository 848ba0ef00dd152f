package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// blackHoleProduce makes cl read every produce request and never answer it, as a
// broker that accepts connections but hangs does: the producer waits for its read
// timeout (sarama: Net.ReadTimeout, 30 s). heal lets later requests through again;
// a request already swallowed stays unanswered.
func blackHoleProduce(cl *kfake.Cluster) (heal func()) {
	var healed atomic.Bool
	cl.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if healed.Load() {
			cl.DropControl()
			return nil, nil, false
		}
		cl.KeepControl()
		return nil, nil, true
	})
	return func() { healed.Store(true) }
}

// waitBlocked waits until r has records in flight and their count has stopped
// growing: the producer's buffers are full and the claim waits to hand it more.
func waitBlocked(t *testing.T, r *runningEngine, atLeast int64) {
	t.Helper()
	var last int64 = -1
	stableSince := time.Now()
	testutil.WaitFor(t, 60*time.Second, "records in flight, their count no longer growing", func() bool {
		n := r.e.Stats().InFlight
		if n != last {
			last, stableSince = n, time.Now()
			return false
		}
		return n >= atLeast && time.Since(stableSince) > time.Second
	})
}

// stopWithin cancels r and returns how long Run took to return; it fails the test
// when Run has not returned after limit.
func stopWithin(t *testing.T, r *runningEngine, limit time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("Run had not returned %v after the stop, want it bounded by the drain", limit)
	}
	if r.err != nil {
		t.Fatalf("Run = %v after a stop, want nil", r.err)
	}
	return time.Since(began)
}

// TestStopWithABlackHoledTargetIsBoundedByTheDrain stops the engine while the target
// swallows every produce request and thousands of records wait in the producer and in
// front of it. Run must return within the drain timeout plus a commit (a generous
// ceiling: three times that), commit nothing the target did not ack, and a restart
// against a healthy target must mirror everything, in order.
func TestStopWithABlackHoledTargetIsBoundedByTheDrain(t *testing.T) {
	const (
		partitions = 1
		drain      = 2 * time.Second
		before     = 1000
		backlog    = 40000
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Streams = 1
		// Neither the in-flight bound nor the delivery timeout may end the wait first:
		// the claim must be blocked handing records to the producer.
		cfg.MaxInFlightPerPartition = 1 << 20
		cfg.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute}
	})
	r := startEngine(t, cfg, testLogger(t), WithDrainTimeout(drain))
	testutil.WaitFor(t, 20*time.Second, "the first records mirrored and committed", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == before
	})

	heal := blackHoleProduce(c.target)
	w.produce(t, c.source, backlog)
	waitBlocked(t, r, 5000)
	inFlight := r.e.Stats().InFlight

	ceiling := 3 * (drain + commitAllowance)
	took := stopWithin(t, r, 60*time.Second)
	t.Logf("Run returned %v after the stop with %d records in flight to a black-holed target (drain %v, ceiling %v)",
		took.Round(time.Millisecond), inFlight, drain, ceiling)
	if took > ceiling {
		t.Fatalf("Run returned %v after the stop, want at most %v (3 x (drain %v + commit %v))", took, ceiling, drain, commitAllowance)
	}
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions)
	if committed[0] != before {
		t.Fatalf("committed %d after the stop, want %d: nothing after it was acked", committed[0], before)
	}
	if held := readTarget(t, c.target, testTopic, before, 300*time.Millisecond, 20*time.Second); int64(len(held[0])) < committed[0] {
		t.Fatalf("the group committed %d but the target holds %d records", committed[0], len(held[0]))
	}

	heal()
	r2 := startEngine(t, cfg, testLogger(t), WithDrainTimeout(drain))
	testutil.WaitFor(t, 60*time.Second, "the backlog mirrored and committed after the restart", func() bool {
		s := r2.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == int64(w.total())
	})
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	res := audit(t, w, readTarget(t, c.target, testTopic, w.total(), time.Second, 60*time.Second), false, true)
	if res.missing != 0 {
		t.Fatalf("%d records lost", res.missing)
	}
	t.Logf("after the restart: %d records on the target, %d lost, %d duplicates", res.records, res.missing, res.duplicates)
}

// TestRebalanceWhileTheTargetHangsIsBoundedByTheDrain lets a third member join the
// group while the target swallows every produce request and both members have
// records waiting for the producer. Both must drain (give up after the drain timeout,
// commit what was acked) and rejoin, so the rebalance completes within the group's
// rebalance timeout; once the target heals, nothing is lost and every partition keeps
// its order on the target.
func TestRebalanceWhileTheTargetHangsIsBoundedByTheDrain(t *testing.T) {
	const (
		partitions = 3
		drain      = 2 * time.Second
		before     = 500
		backlog    = 30000
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Streams = 1
		cfg.MaxInFlightPerPartition = 1 << 20
		cfg.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute}
	})
	start := func() *runningEngine { return startEngine(t, cfg, testLogger(t), WithDrainTimeout(drain)) }
	a, b := start(), start()
	groupStable(t, c.source, cfg.ConsumerGroup, 2, 30*time.Second)
	testutil.WaitFor(t, 30*time.Second, "the first records mirrored and committed", func() bool {
		committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions)
		for p := int32(0); p < partitions; p++ {
			if committed[p] != before {
				return false
			}
		}
		return true
	})

	heal := blackHoleProduce(c.target)
	w.produce(t, c.source, backlog)
	waitBlocked(t, a, 5000)
	waitBlocked(t, b, 5000)

	sc := sarama.NewConfig()
	fastGroup(sc)
	rebalanceTimeout := sc.Consumer.Group.Rebalance.Timeout
	began := time.Now()
	third := start()
	groupStable(t, c.source, cfg.ConsumerGroup, 3, rebalanceTimeout)
	// The coordinator reports the group stable before each member's Setup has run:
	// wait for the members themselves, within the same rebalance timeout.
	for i, r := range []*runningEngine{a, b, third} {
		testutil.WaitFor(t, rebalanceTimeout, fmt.Sprintf("engine %d ready after the rebalance", i), func() bool { return r.e.Ready() == nil })
	}
	took := time.Since(began)
	t.Logf("the rebalance with a hanging target completed %v after the third member started (drain %v, rebalance timeout %v)",
		took.Round(time.Millisecond), drain, rebalanceTimeout)
	if a.e.Stats().Rebalances < 2 || b.e.Stats().Rebalances < 2 {
		t.Fatalf("the first two members did not rejoin: rebalances %d and %d", a.e.Stats().Rebalances, b.e.Stats().Rebalances)
	}

	heal()
	for _, r := range []*runningEngine{a, b, third} {
		stopWithin(t, r, 3*(drain+commitAllowance)+rebalanceTimeout)
	}
	last := start()
	testutil.WaitFor(t, 90*time.Second, "everything mirrored and committed after the target healed", func() bool {
		s := last.e.Stats()
		if len(s.Partitions) != partitions {
			return false
		}
		for _, p := range s.Partitions {
			if p.Committed != int64(before+backlog) {
				return false
			}
		}
		return true
	})
	if err := last.stop(t); err != nil {
		t.Fatal(err)
	}
	res := audit(t, w, readTarget(t, c.target, testTopic, w.total(), time.Second, 90*time.Second), false, true)
	if res.missing != 0 {
		t.Fatalf("%d records lost", res.missing)
	}
	t.Logf("after the target healed: %d records on the target, %d lost, %d duplicates, order kept per partition",
		res.records, res.missing, res.duplicates)
}

// groupStable waits until the source cluster reports group stable with members
// members, failing the test after limit.
func groupStable(t *testing.T, cl *kfake.Cluster, group string, members int, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if g, err := cl.WaitGroupStable(ctx, group, members); err != nil {
		state, n := "missing", 0
		if g != nil {
			state, n = g.State, len(g.Members)
		}
		t.Fatalf("group %q not stable with %d members within %v: state %s with %d members", group, members, limit, state, n)
	}
}

// TestDeliveryWatchFollowsReleasedPartitions checks that a partition's records still
// in the producer after its drain gave up stay watched: deliveryTimeout after its
// commit point stopped moving, the watch reports it, also when the partition was
// reassigned meanwhile. A record that was never handed to the producer is not watched.
func TestDeliveryWatchFollowsReleasedPartitions(t *testing.T) {
	const timeout = time.Minute
	tests := map[string]struct {
		unsent     int  // records Added but never sent
		reassigned bool // the partition came back to this process with a new tracker
		wantErr    bool
	}{
		"released with a record in flight":            {wantErr: true},
		"released and reassigned, record in flight":   {reassigned: true, wantErr: true},
		"released with only an unsent record":         {unsent: 1},
		"released and reassigned, only unsent record": {unsent: 1, reassigned: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := &Engine{
				cfg:   &config.Config{Target: config.Cluster{BootstrapServers: []string{"target:9092"}}},
				parts: partitionRegistry{parts: map[partitionKey]*partitionState{}, m: newMetrics()},
			}
			p := e.parts.get(testTopic, 0)
			old := offsets.New(16)
			old.Add(41, 1)
			p.mu.Lock()
			p.tracker, p.assigned = old, true
			p.mu.Unlock()
			p.setUnsent(tc.unsent)
			p.detach()
			if tc.reassigned {
				p.mu.Lock()
				p.tracker, p.assigned, p.unsent = offsets.New(16), true, 0
				p.mu.Unlock()
			}

			stalls := map[*offsets.Tracker]*stall{}
			now := time.Now()
			if err := e.checkDelivery(stalls, now, timeout); err != nil {
				t.Fatalf("first look: %v, want nil", err)
			}
			err := e.checkDelivery(stalls, now.Add(timeout), timeout)
			if (err != nil) != tc.wantErr {
				t.Fatalf("after deliveryTimeout: err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && !strings.Contains(err.Error(), "offset 41") {
				t.Fatalf("error %q does not name offset 41", err)
			}
			old.Ack(0)
			if err := e.checkDelivery(stalls, now.Add(2*timeout), timeout); err != nil {
				t.Fatalf("after the ack: %v, want nil", err)
			}
			if n := len(p.watched()); n != 0 {
				t.Fatalf("%d trackers still watched after the ack, want 0", n)
			}
		})
	}
}
