//go:build kafka

package e2ekafka

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The TestSmoke* tests run on single-broker clusters and take a few minutes in all:
// .ci/run runs them (make e2e-kafka-smoke) on every change.

// skipFilter is the CEL filter the filtered workloads are mirrored through.
var skipFilter = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}

const skipFraction = 0.01

// smokeTopics are 2 topics x 4 partitions: enough partitions for two streams and a
// rebalance, few enough for a single broker on a busy machine.
func smokeTopics() map[string]int32 {
	return map[string]int32{"e2e.orders": 4, "e2e.payments": 4}
}

// TestSmokeKill9: kill -9 the engine twice mid-stream on real brokers, restarting it
// each time; each kill lands at a random moment between two commits of an engine that
// has caught up. Zero loss; the duplicates are at most, per kill, the records in flight
// plus one commit interval of traffic.
func TestSmokeKill9(t *testing.T) {
	s := newScenario(t, world{}, smokeTopics())
	cfg := s.config(func(c *config.Config) { c.Handlers = skipFilter })
	w := s.workload(60_000, 2000, skipFraction)
	e := s.startJoined("engine-0", cfg)
	bg := s.produce(w)
	const kills = 2
	for i := 1; i <= kills; i++ {
		bg.WaitSent(w.Records * i / (kills + 1))
		// Steady state: the (re)started engine committed everything produced so far,
		// so one commit interval holds the production rate's worth, not a backlog.
		s.waitCommitted(int64(bg.Progress()), 2*time.Minute)
		time.Sleep(time.Duration(rand.Int63n(int64(commitInterval))))
		e.Kill()
		t.Logf("kill -9 #%d with the target holding %d records", i, s.targetCount())
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.StopCleanly(time.Minute)
	perKill := e2eharness.Partitions(s.topics)*maxInFlight + int(float64(w.Rate)*commitInterval.Seconds())
	s.assertAudit(rep, kills*perKill)
	s.figures(rep, map[string]any{"brokers": 1, "kills": kills, "per_kill_bound": perKill})
}

// TestSmokeExactlyOnceKill9: the same kills with delivery exactlyOnce against a real
// transaction coordinator: each restarted engine's first transaction fences the killed
// one's (same transactional id) and the coordinator aborts what it left open. Counted
// by a read_committed reader: zero loss, zero duplicates.
func TestSmokeExactlyOnceKill9(t *testing.T) {
	s := newScenario(t, world{}, smokeTopics())
	cfg := s.config(func(c *config.Config) {
		c.Handlers = skipFilter
		exactlyOnce(c)
	})
	w := s.workload(60_000, 2000, skipFraction)
	e := s.startJoined("engine-0", cfg)
	bg := s.produce(w)
	const kills = 2
	for i := 1; i <= kills; i++ {
		bg.WaitSent(w.Records * i / (kills + 1))
		s.waitProgress(2000, 2*time.Minute)
		time.Sleep(time.Duration(rand.Int63n(int64(commitInterval))))
		e.Kill()
		t.Logf("kill -9 #%d with the target holding %d records (read_uncommitted end offsets)", i, s.targetCount())
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	rep := s.waitCompleteCommitted(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 1, "kills": kills, "delivery": "exactlyOnce", "isolation": "read_committed"})
}
