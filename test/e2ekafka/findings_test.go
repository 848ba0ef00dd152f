//go:build kafka

package e2ekafka

import (
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// firstRecordBound is how soon after its start an engine must have mirrored a first
// record on idle single-broker clusters: it connects, joins and fences in about 2 s on
// a quiet machine; the bound is generous for a busy one.
const firstRecordBound = 20 * time.Second

// TestExactlyOnceFirstStartOnFreshTarget: an exactly-once engine's first start against a
// target cluster on which no consumer group was ever used (its __consumer_offsets topic
// does not exist yet, as on a new disaster-recovery cluster) must mirror as soon as an
// at-least-once engine does. Real Kafka answers the first FindCoordinator for a
// transactional id with COORDINATOR_NOT_AVAILABLE while it creates __transaction_state;
// sarama then looks up the leader of __consumer_offsets, a topic that nothing creates,
// and the engine's producer config retried that lookup for deliveryTimeout: nothing was
// mirrored for deliveryTimeout (2 minutes by default; 64.6 s here with 1 minute). The
// engine now asks for its group's coordinator on the target as it starts
// (warmTxnGroupCoordinator), which makes Kafka create the topic. kfake never answers
// COORDINATOR_NOT_AVAILABLE, so test/e2e cannot see it.
func TestExactlyOnceFirstStartOnFreshTarget(t *testing.T) {
	s := newScenario(t, world{}, smokeTopics())
	cfg := s.config(func(c *config.Config) {
		exactlyOnce(c)
		c.DeliveryTimeout = config.Duration{Duration: time.Minute}
	})
	p := s.produce(s.workload(1000, 0, 0)).Wait(t)
	start := time.Now()
	e := s.startEngine("engine", cfg)
	for s.targetCount() == 0 {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("nothing mirrored within 3 minutes; log tail:\n%s", e.LogTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	first := time.Since(start)
	if first > firstRecordBound {
		t.Errorf("the first record reached the target %v after the engine started, want within %v (deliveryTimeout is %v)", first.Round(100*time.Millisecond), firstRecordBound, cfg.DeliveryTimeout.Duration)
	}
	rep := s.waitCompleteCommitted(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"delivery": "exactlyOnce", "first_record_seconds": first.Round(100 * time.Millisecond).Seconds()})
}
