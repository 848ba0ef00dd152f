//go:build kafka

package e2ekafka

import (
	"context"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Broker faults on 3-broker clusters: every topic has replication factor 3 and
// min.insync.replicas 2, so one broker down leaves every partition writable, as in
// production.

// replicatedTopics are 2 topics x 6 partitions: each broker leads some of them.
func replicatedTopics() map[string]int32 {
	return map[string]int32{"e2e.orders": 6, "e2e.payments": 6}
}

const (
	// brokerDownFor keeps a killed broker down past the controller's session timeout
	// (broker.session.timeout.ms, 9 s), so that its partitions really move to other
	// leaders and shrink their ISR before it comes back.
	brokerDownFor = 15 * time.Second
	// brokerRecordsRate keeps the workload running through a kill, the leader election
	// and the restart.
	brokerRecords     = 90_000
	brokerRecordsRate = 2000
)

// column is a delivery mode the broker faults run in.
type column struct {
	exactlyOnce bool
	// saramaProducers sets producer.maxInFlightRequests 1: sarama's idempotent
	// producers rather than the engine's pipelined ones (the default, 5).
	saramaProducers bool
}

func (col column) apply(c *config.Config) {
	if col.exactlyOnce {
		exactlyOnce(c)
	}
	if col.saramaProducers {
		if c.Producer == nil {
			c.Producer = &config.Producer{}
		}
		c.Producer.MaxInFlightRequests = 1
	}
}

// complete waits for every record: read_committed and no duplicate allowed with
// exactly-once.
func (col column) complete(s *scenario, p *audit.Produced) audit.Report {
	if col.exactlyOnce {
		return s.waitCompleteCommitted(p, audit.Options{})
	}
	return s.waitComplete(p, audit.Options{})
}

func (col column) figures(f map[string]any) map[string]any {
	f["brokers"] = 3
	if col.exactlyOnce {
		f["delivery"], f["isolation"] = "exactlyOnce", "read_committed"
	}
	if col.saramaProducers {
		f["maxInFlightRequests"] = 1
	}
	return f
}

// TestSourceLeaderKill9: kill -9 the broker leading e2e.orders/0 on the source while
// records flow, bring it back 15 s later. The engine's fetches move to the new leaders
// (sarama refreshes metadata on NOT_LEADER), nothing is lost and the engine never exits;
// duplicates at most what was in flight.
func TestSourceLeaderKill9(t *testing.T) { leaderKill9(t, "source", column{}) }

// TestTargetLeaderKill9: kill -9 the broker leading e2e.orders/0 on the target while
// records flow: up to five batches per partition in flight to the killed leader when
// it dies (the pipelined producer, the default); the producer waits for all their
// answers (connection errors), then sends every un-acked batch again in order, with the
// same sequences, to the new leader. Zero loss, order per partition, the engine never
// exits.
func TestTargetLeaderKill9(t *testing.T) { leaderKill9(t, "target", column{}) }

// TestTargetLeaderKill9ExactlyOnce is TestTargetLeaderKill9 with delivery exactlyOnce:
// the transactions open on the dead leader's partitions complete on the new leader or
// abort and are redone; read_committed, zero duplicates.
func TestTargetLeaderKill9ExactlyOnce(t *testing.T) {
	leaderKill9(t, "target", column{exactlyOnce: true})
}

// TestTargetLeaderKill9SaramaProducers is TestTargetLeaderKill9 with
// producer.maxInFlightRequests 1: sarama's idempotent producers retry the requests
// that got no answer to the new leader.
func TestTargetLeaderKill9SaramaProducers(t *testing.T) {
	leaderKill9(t, "target", column{saramaProducers: true})
}

func leaderKill9(t *testing.T, side string, col column) {
	s := newScenario(t, world{brokers: 3}, replicatedTopics())
	cfg := s.config(col.apply)
	w := s.workload(brokerRecords, brokerRecordsRate, 0)
	e := s.startJoined("engine", cfg)
	bg := s.produce(w)
	bg.WaitSent(w.Records / 4)
	s.waitProgress(2000, 2*time.Minute)
	c := s.cluster(side)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := c.Leader(ctx, "e2e.orders", 0)
	if err != nil || leader < 1 {
		t.Fatalf("the leader of e2e.orders/0 on the %s: %d, %v", side, leader, err)
	}
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	killedAt := s.targetCount()
	t.Logf("killed -9 %s broker %d (leader of e2e.orders/0) with the target holding %d records", side, leader, killedAt)
	time.Sleep(brokerDownFor)
	newLeader, err := c.Leader(ctx, "e2e.orders", 0)
	if err != nil || newLeader == leader || newLeader < 1 {
		t.Errorf("e2e.orders/0 on the %s: leader %d %v after killing broker %d for %v, want another broker", side, newLeader, err, leader, brokerDownFor)
	}
	s.waitProgress(2000, 2*time.Minute) // mirroring goes on with one broker down
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitInSync(ctx, e2eharness.TopicNames(s.topics)...); err != nil {
		t.Fatal(err)
	}
	p := bg.Wait(t)
	rep := col.complete(s, p)
	if !e.Running() {
		t.Errorf("the engine exited (code %d) during the broker fault; log tail:\n%s", e.ExitCode(), e.LogTail(20))
	}
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, e2eharness.Partitions(s.topics)*maxInFlight)
	s.figures(rep, col.figures(map[string]any{"killed": side + " broker leading e2e.orders/0", "new_leader": newLeader}))
}

// TestTargetRollingRestart: every target broker in turn stopped (SIGTERM: a controlled
// shutdown moves its leaderships first) and restarted, waiting for every partition to
// be back in sync before the next, while records flow: what a Kafka upgrade does. The
// engine never exits; zero loss; duplicates at most what was in flight.
func TestTargetRollingRestart(t *testing.T) { rollingRestart(t, column{}) }

// TestTargetRollingRestartSaramaProducers is TestTargetRollingRestart with
// producer.maxInFlightRequests 1 (sarama's idempotent producers).
func TestTargetRollingRestartSaramaProducers(t *testing.T) {
	rollingRestart(t, column{saramaProducers: true})
}

// TestTargetRollingRestartExactlyOnce is TestTargetRollingRestart with delivery
// exactlyOnce: the transaction coordinators move too. Read_committed, zero duplicates.
func TestTargetRollingRestartExactlyOnce(t *testing.T) { rollingRestart(t, column{exactlyOnce: true}) }

func rollingRestart(t *testing.T, col column) {
	s := newScenario(t, world{brokers: 3}, replicatedTopics())
	cfg := s.config(col.apply)
	// Longer than the kills' workload: three controlled shutdowns, restarts and ISR
	// catch-ups take about a minute on a busy machine, and records must flow throughout.
	w := s.workload(150_000, 1500, 0)
	e := s.startJoined("engine", cfg)
	bg := s.produce(w)
	bg.WaitSent(w.Records / 8)
	s.waitProgress(2000, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var took []string
	for _, id := range s.dst.IDs() {
		start := time.Now()
		if err := s.dst.Stop(id); err != nil {
			t.Fatal(err)
		}
		if err := s.dst.Restart(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.dst.WaitInSync(ctx); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start).Round(100*time.Millisecond).String())
		t.Logf("restarted target broker %d in %v; the target holds %d records", id, time.Since(start).Round(100*time.Millisecond), s.targetCount())
	}
	if bg.Progress() >= w.Records {
		t.Logf("the workload ended before the last restart was done")
	}
	p := bg.Wait(t)
	rep := col.complete(s, p)
	if !e.Running() {
		t.Errorf("the engine exited (code %d) during the rolling restart; log tail:\n%s", e.ExitCode(), e.LogTail(20))
	}
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, e2eharness.Partitions(s.topics)*maxInFlight)
	s.figures(rep, col.figures(map[string]any{"restarts": took}))
}
