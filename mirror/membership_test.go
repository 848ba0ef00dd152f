package mirror

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// slowGroup is fastGroup with the timings of a group that notices a lost member late:
// a killed dynamic member holds its partitions for the 2 min session timeout (or the
// 60 s rebalance timeout of the join that follows), far beyond the tests' 30 s ceilings,
// so that only static membership explains a hand-over inside them.
func slowGroup(sc *sarama.Config) {
	fastGroup(sc)
	sc.Consumer.Group.Session.Timeout = 2 * time.Minute
	sc.Consumer.Group.Rebalance.Timeout = time.Minute
}

func staticMember(id string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Streams = 1
		cfg.Consumer = &config.Consumer{GroupInstanceID: id}
	}
}

// twoStaticMembers starts engines a and b as static members pod-a and pod-b of one group
// with slowGroup's timings, and records flowing on partitions source partitions, and
// returns once both mirror.
func twoStaticMembers(t *testing.T, partitions int32) (*testClusters, *workload, *runningEngine, *runningEngine, func()) {
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	slow := func(o *options) { o.tuneSarama = slowGroup }
	a := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a"), slow)
	testutil.WaitFor(t, 60*time.Second, "engine a mirroring", func() bool { return a.e.Stats().Records >= 1_000 })
	b := startEngine(t, c.testConfig(t, staticMember("pod-b")), testLogger(t).WithName("b"), slow)
	stopProducing := w.background(t, c.source, 200, 20*time.Millisecond)
	testutil.WaitFor(t, 60*time.Second, "both engines mirroring", func() bool {
		return a.e.Stats().Records >= 2_000 && b.e.Stats().Records >= 200
	})
	return c, w, a, b, stopProducing
}

// TestStaticMemberGetsItsPartitionsBackAfterACrash kills one of two static members and
// starts it again under the same instance ID: it mirrors again at once (a new dynamic
// member, or a replacement pod with another name, waits the minute of the rebalance
// timeout for the killed member's place: tried, the 30 s ceiling fails), the other
// member sees at most one prompt rebalance, and nothing is lost (issue 28 item 4).
func TestStaticMemberGetsItsPartitionsBackAfterACrash(t *testing.T) {
	const partitions = 4
	c, w, a, b, stopProducing := twoStaticMembers(t, partitions)
	slow := func(o *options) { o.tuneSarama = slowGroup }
	bSessions := b.e.Stats().Rebalances

	a.e.Abort()
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	restarted := time.Now()
	a2 := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a2"), slow)
	testutil.WaitFor(t, 30*time.Second, "the restarted engine a mirroring again (a killed dynamic member would hold its partitions for a minute)", func() bool {
		return a2.e.Stats().Records >= 200
	})
	back := time.Since(restarted)
	stopProducing()

	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 {
		t.Fatalf("after a static member's crash and restart %d records are missing", res.missing)
	}
	// The restarted member's subscription carries no owned partitions, so the
	// coordinator may run one rebalance for it (at once, not after the session timeout).
	if n := b.e.Stats().Rebalances - bSessions; n > 1 {
		t.Fatalf("engine b went through %d new group sessions while a crashed and came back, want at most 1", n)
	}
	for _, r := range []*runningEngine{a2, b} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("static member killed and restarted: mirroring again %v after the restart, b saw %d new sessions, %d records, 0 lost, %d duplicates",
		back.Round(time.Millisecond), b.e.Stats().Rebalances-bSessions, res.records, res.duplicates)
}

// TestStaticMemberHandsOverAtOnceOnACleanStop stops one of two static members cleanly
// (a scale-down, a rolling update): it drains, commits and removes itself from the group,
// so the other takes its partitions at once rather than after the session timeout, with
// nothing lost or duplicated. Without the leave the test times out (tried).
func TestStaticMemberHandsOverAtOnceOnACleanStop(t *testing.T) {
	const partitions = 4
	c, w, a, b, stopProducing := twoStaticMembers(t, partitions)
	if err := b.stop(t); err != nil {
		t.Fatalf("engine b: %v", err)
	}
	stopped := time.Now()
	assigned := func() int {
		n := 0
		for _, p := range a.e.Stats().Partitions {
			if p.Assigned {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 30*time.Second, "engine a owning every partition (without the leave it would wait for the 2 min session timeout)", func() bool {
		return assigned() == partitions
	})
	took := time.Since(stopped)
	stopProducing()

	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("after a static member's clean stop: %d missing, %d duplicates; want 0 and 0", res.missing, res.duplicates)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("static member stopped cleanly: the other owned every partition %v later, %d records, 0 lost, 0 duplicates",
		took.Round(time.Millisecond), res.records)
}

// TestTwoProcessesWithOneInstanceIDStop starts a second engine under the instance ID of
// a running one: the coordinator fences the first, which stops with an error naming
// consumer.groupInstanceId instead of rejoining and fencing the second in turn, again
// and again.
func TestTwoProcessesWithOneInstanceIDStop(t *testing.T) {
	c := newClusters(t, 2)
	w := newWorkload(2)
	w.produce(t, c.source, 200)
	a := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a"))
	testutil.WaitFor(t, 60*time.Second, "engine a mirroring", func() bool { return a.e.Stats().Records >= 400 })
	b := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("b"))
	err := a.wait(t, 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "consumer.groupInstanceId must differ") {
		t.Fatalf("the fenced engine returned %v, want an error naming consumer.groupInstanceId", err)
	}
	w.produce(t, c.source, 100)
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	if res := audit(t, w, got, false, true); res.missing != 0 {
		t.Fatalf("%d records missing after the fenced engine stopped", res.missing)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("the fenced engine stopped with: %v", err)
}

// TestReplacementOfAKilledStaticMember kills a static member and starts its replacement
// under a new ID (a Deployment's pod rescheduled after its node was lost): the killed
// member's place is not kept for good, the replacement gets every partition once the
// killed member's session timed out (6 s here), and nothing is lost.
func TestReplacementOfAKilledStaticMember(t *testing.T) {
	const partitions = 4
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 300)
	a := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a"))
	testutil.WaitFor(t, 60*time.Second, "engine a mirroring", func() bool { return a.e.Stats().Records >= 1_200 })
	a.e.Abort()
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	w.produce(t, c.source, 300)
	started := time.Now()
	r := startEngine(t, c.testConfig(t, staticMember("pod-r")), testLogger(t).WithName("replacement"))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 {
		t.Fatalf("%d records missing after the replacement took over", res.missing)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("replacement under a new ID: every record on the target %v after its start (the killed member's 6 s session), %d records, 0 lost, %d duplicates",
		time.Since(started).Round(time.Millisecond), res.records, res.duplicates)
}

// TestStaticMemberRestartedAfterTheSourceGrew kills a static member, adds partitions to
// the source topic while it is down and starts it again under its ID: the coordinator
// hands the returning member its old assignment without a rebalance, which names none of
// the new partitions, and the member's own metadata already shows them, so sarama sees no
// change to rejoin for. The engine must notice the unowned partitions and have the group
// assign them: every record of the new partitions reaches the target.
func TestStaticMemberRestartedAfterTheSourceGrew(t *testing.T) {
	const before, after = 2, 4
	c := newClusters(t, before)
	w := newWorkload(before)
	w.produce(t, c.source, 300)
	a := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a"))
	testutil.WaitFor(t, 60*time.Second, "engine a mirroring", func() bool { return a.e.Stats().Records >= 600 })
	a.e.Abort()
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run after Abort = %v, want nil", err)
	}
	if err := sourceAdmin(t, c).CreatePartitions(testTopic, after, nil, false); err != nil {
		t.Fatal(err)
	}
	w.partitions = after
	w.next = append(w.next, make([]int, after-before)...)
	w.produce(t, c.source, 200)

	a2 := startEngine(t, c.testConfig(t, staticMember("pod-a")), testLogger(t).WithName("a2"))
	testutil.WaitFor(t, time.Minute, "the new partitions mirrored", func() bool {
		n := 0
		for _, p := range a2.e.Stats().Partitions {
			if p.Partition >= before && p.Records >= 200 {
				n++
			}
		}
		return n == after-before
	})
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, time.Minute)
	res := audit(t, w, got, false, true)
	if res.missing != 0 {
		t.Fatalf("%d records missing: the restarted static member never got the partitions added while it was down", res.missing)
	}
	if err := a2.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("static member restarted after the source grew %d -> %d: %d records, 0 lost, %d duplicates", before, after, res.records, res.duplicates)
}
