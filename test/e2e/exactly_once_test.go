//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestKill9ExactlyOnce is TestKill9's exactly-once column: the engine runs with
// delivery exactlyOnce and is killed with kill -9 three times mid-stream, restarting
// each time. Counted by a read_committed reader of the target: zero loss and zero
// duplicates (TestKill9, at-least-once, allows in flight + one commit interval per kill).
func TestKill9ExactlyOnce(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) {
		c.Handlers = skipFilter
		c.Delivery = config.DeliveryExactlyOnce
		c.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
	})
	w := s.stdWorkload(skipFraction)
	w.Rate = 4000
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	const kills = 3
	for i := 1; i <= kills; i++ {
		bg.WaitSent(w.Records * i / (kills + 1))
		// Steady state: the engine (re)joined and committed transactions since it started.
		s.waitCommittedTarget(s.committedTargetSum()+2000, time.Minute)
		time.Sleep(time.Duration(rand.Int63n(int64(commitInterval))))
		e.Kill()
		t.Logf("kill -9 #%d with the target holding %d records (read_uncommitted end offsets)", i, s.targetCount())
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	rep := s.waitCompleteCommitted(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"kills": kills, "delivery": "exactlyOnce", "isolation": "read_committed"})
}

// TestZombieFencedExactlyOnce: two engines mirror with delivery exactlyOnce; one is
// paused (SIGSTOP) with its transactions open until the group gives its partitions to
// the other, which fences them, then resumed (SIGCONT). The resumed zombie's writes are
// refused (it logs that it was fenced), and a read_committed reader of the target sees
// every record exactly once.
func TestZombieFencedExactlyOnce(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) {
		c.Streams = 1
		c.Handlers = skipFilter
		c.Delivery = config.DeliveryExactlyOnce
		c.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
	})
	w := s.stdWorkload(skipFraction)
	w.Rate = 4000
	zombie := s.startEngine("zombie", cfg)
	other := s.startEngine("other", cfg)
	bg := s.produce(w)
	bg.WaitSent(w.Records / 4)
	s.waitCommittedTarget(s.committedTargetSum()+2000, time.Minute)
	joins := other.CountLog("Joined the consumer group")
	if err := zombie.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The group evicts the paused member after its session timeout and gives every
	// partition to the other engine, whose Setup fences the zombie's transactional ids.
	deadline := time.Now().Add(2 * time.Minute)
	for other.CountLog("Joined the consumer group") == joins {
		if time.Now().After(deadline) {
			t.Fatalf("the other engine never took the paused one's partitions over; log tail:\n%s", other.LogTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.waitCommittedTarget(s.committedTargetSum()+2000, time.Minute)
	if err := zombie.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for zombie.CountLog("Was fenced by a newer owner") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed zombie never reported being fenced; log tail:\n%s", zombie.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	fencedClaims := zombie.CountLog("Was fenced by a newer owner")
	p := bg.Wait(t)
	rep := s.waitCompleteCommitted(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	zombie.StopCleanly(time.Minute)
	other.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"delivery": "exactlyOnce", "isolation": "read_committed", "zombie_fenced_claims": fencedClaims})
}

// TestTargetOutageExactlyOnce is TestTargetOutage's exactly-once column: the target is
// unreachable for 5 s and for 60 s while records flow. Transactions wait (sarama retries
// for deliveryTimeout, 2m) or, when the target aborted one on its transaction timeout
// meanwhile, the claim restarts from the target's offset; the engine is supervised (an
// exit would be restarted as by its pod, and reported). A read_committed reader sees
// every record exactly once.
func TestTargetOutageExactlyOnce(t *testing.T) {
	for name, outage := range map[string]time.Duration{"5s": 5 * time.Second, "60s": 60 * time.Second} {
		t.Run(name, func(t *testing.T) {
			s := newScenario(t, stdTopics())
			cfg := s.config(func(c *config.Config) {
				c.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute}
				c.Delivery = config.DeliveryExactlyOnce
				c.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
			})
			w := s.stdWorkload(0)
			sv := s.supervise("engine", cfg)
			bg := s.produce(w)
			bg.WaitSent(w.Records / 3)
			s.waitCommittedTarget(s.committedTargetSum()+2000, time.Minute)
			s.dst.disable()
			time.Sleep(outage)
			s.dst.enable(t)
			if exits := sv.restarts(); len(exits) > 0 {
				t.Errorf("the engine exited %d times during a %v outage shorter than deliveryTimeout (2m); first: %s", len(exits), outage, exits[0])
			}
			p := bg.Wait(t)
			rep := s.waitCompleteCommitted(p, audit.Options{})
			sv.stop(time.Minute)
			if exits := sv.restarts(); len(exits) > 0 {
				t.Errorf("the engine exited %d times after a %v outage shorter than deliveryTimeout (2m); first: %s", len(exits), outage, exits[0])
			}
			s.assertAudit(rep, 0)
			s.figures(rep, map[string]any{"outage": outage.String(), "delivery": "exactlyOnce", "isolation": "read_committed",
				"engine_exits": len(sv.restarts())})
		})
	}
}

// committedTargetSum sums what the target holds below its last stable offsets: records
// of committed transactions (and their markers).
func (s *scenario) committedTargetSum() int64 {
	s.t.Helper()
	r := audit.NewReader(s.dst.addrs(), e2eharness.TopicNames(s.topics))
	r.ReadCommitted = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Poll(ctx); err != nil {
		s.t.Fatalf("reading the target: %v", err)
	}
	return int64(len(r.Mirrored().Records))
}

// waitCommittedTarget waits until the target's committed records reach n. It fails
// when they have not grown for stall (a member waiting out a dead one's session, its
// fencing and a first transaction needs well under that), not after a fixed time in
// all: on a machine whose cores are stolen for seconds the catch-up after a restart
// keeps moving yet once fell 2,000 records short of a one-minute bound.
// waitCommittedCeiling keeps a trickle from running forever.
func (s *scenario) waitCommittedTarget(n int64, stall time.Duration) {
	s.t.Helper()
	start, lastGrew := time.Now(), time.Now()
	got := s.committedTargetSum()
	for time.Since(lastGrew) < stall && time.Since(start) < waitCommittedCeiling {
		if got >= n {
			return
		}
		time.Sleep(200 * time.Millisecond)
		if now := s.committedTargetSum(); now > got {
			got, lastGrew = now, time.Now()
		}
	}
	s.t.Fatalf("the target's committed records reached %d after %v (the last growth %v ago), want at least %d",
		got, time.Since(start).Round(time.Second), time.Since(lastGrew).Round(time.Second), n)
}

// waitCommittedCeiling bounds waitCommittedTarget however slowly the records grow.
const waitCommittedCeiling = 5 * time.Minute

// waitCompleteCommitted reads the target read_committed until every expected record is
// there, failing the test with the audit table if that does not happen within
// completeTimeout.
func (s *scenario) waitCompleteCommitted(p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	return e2eharness.WaitCompleteCommitted(s.t, s.dst.addrs(), e2eharness.TopicNames(s.topics), p, opts, completeTimeout)
}

// column is one delivery column of the fault suite: a fault test written once runs with
// at-least-once (its own name) and with exactly-once (the name with ExactlyOnce).
type column struct {
	// exactlyOnce sets delivery exactlyOnce; the audit then reads the target
	// read_committed and allows no duplicate.
	exactlyOnce bool
}

var (
	atLeastOnce       = column{}
	exactlyOnceColumn = column{exactlyOnce: true}
)

// apply sets the column's delivery on c.
func (col column) apply(c *config.Config) {
	if col.exactlyOnce {
		c.Delivery = config.DeliveryExactlyOnce
		c.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
	}
}

// maxDuplicates is the duplicate bound of the column: atLeastOnce's own, 0 exactly once.
func (col column) maxDuplicates(atLeastOnce int) int {
	if col.exactlyOnce {
		return 0
	}
	return atLeastOnce
}

// figures adds the column's delivery and isolation to a test's figures.
func (col column) figures(f map[string]any) map[string]any {
	if col.exactlyOnce {
		f["delivery"], f["isolation"] = "exactlyOnce", "read_committed"
	}
	return f
}

// waitCompleteIn is waitComplete for the column: read_committed with exactly-once.
func (s *scenario) waitCompleteIn(col column, p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	if col.exactlyOnce {
		return s.waitCompleteCommitted(p, opts)
	}
	_, rep := s.waitComplete(p, opts)
	return rep
}

// TestScaleOutAndInExactlyOnce is TestScaleOutAndIn's exactly-once column: 1 -> 3 -> 1
// processes mid-stream; every hand-over fences the partition's transactional id and
// resumes from the target's offset. 0 lost, 0 duplicates read_committed.
func TestScaleOutAndInExactlyOnce(t *testing.T) { scaleOutAndIn(t, exactlyOnceColumn) }

// TestAcksLostExactlyOnce is TestAcksLost's exactly-once column: the target's answers
// are cut in two 3 s windows; the transactional producer retries (records deduplicated
// by its sequence numbers, the transaction requests retried) and a read_committed
// reader sees every record exactly once.
func TestAcksLostExactlyOnce(t *testing.T) { acksLost(t, exactlyOnceColumn) }

// TestSourceResetsAndTargetLatencyExactlyOnce is TestSourceResetsAndTargetLatency's
// exactly-once column: source connections reset in three 1 s windows, every target
// answer 100 ms late (so every transaction's four round trips are too). 0 lost,
// 0 duplicates read_committed.
func TestSourceResetsAndTargetLatencyExactlyOnce(t *testing.T) {
	sourceResetsAndTargetLatency(t, exactlyOnceColumn)
}

// TestPartitionExpansionAndNewTopicExactlyOnce is TestPartitionExpansionAndNewTopic's
// exactly-once column: the new partitions get their own transactional ids when the
// group rebalances onto them, and are mirrored from their first offset, once.
func TestPartitionExpansionAndNewTopicExactlyOnce(t *testing.T) {
	partitionExpansionAndNewTopic(t, exactlyOnceColumn)
}

// TestTransactionalSourceExactlyOnce is TestTransactionalSource's exactly-once column:
// a source written in transactions (30% aborted) mirrored in target transactions; no
// aborted source record reaches the target, nothing twice, and the source group's
// offset still passes every committed record (lag and people read it).
func TestTransactionalSourceExactlyOnce(t *testing.T) { transactionalSource(t, exactlyOnceColumn) }

// TestSlowTargetExactlyOnce is TestSlowTarget's exactly-once column: a 256 KiB/s
// target for 15 s; transactions wait for it, memory stays bounded, 0 lost, 0
// duplicates read_committed.
func TestSlowTargetExactlyOnce(t *testing.T) { slowTarget(t, exactlyOnceColumn) }
