//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The standard workload: 3 topics x 8 partitions, keyed, with headers and tombstones.
const (
	stdRecords      = 200_000
	stdRate         = 20_000 // records/s, so a run lasts ~10 s and faults land mid-stream
	stdPartitions   = 8
	stdNullFraction = 0.05
	commitInterval  = e2eharness.CommitInterval
	maxInFlight     = e2eharness.MaxInFlight // per partition
	completeTimeout = 3 * time.Minute

	// settleGrace is how long an engine that reported a fatal error gets to exit by
	// itself before the test stops it (Engine.Settle).
	settleGrace = 10 * time.Second
)

func stdTopics() map[string]int32 {
	return map[string]int32{"e2e.orders": stdPartitions, "e2e.payments": stdPartitions, "e2e.events": stdPartitions}
}

// scenario is one test's world: a source and a target cluster behind proxies, their
// topics, a directory for configs and logs, and the figures the test reports.
type scenario struct {
	t      *testing.T
	src    *cluster
	dst    *cluster
	dir    string
	topics map[string]int32
	group  string
	start  time.Time
	// refused counts workload records the source refused: such a record may still
	// have been written, and then shows up on the target as unknown.
	refused int
}

// newScenario starts both clusters and creates topics on both, with equal partition
// counts, as the operator's topic sync would before the engine starts.
func newScenario(t *testing.T, topics map[string]int32) *scenario {
	t.Helper()
	engineBinary(t)
	s := &scenario{
		t:      t,
		src:    newCluster(t, "source", 1),
		dst:    newCluster(t, "target", 1),
		dir:    t.TempDir(),
		topics: topics,
		group:  e2eharness.GroupName(t),
		start:  time.Now(),
	}
	s.src.createTopics(t, topics, nil)
	s.dst.createTopics(t, topics, nil)
	s.keepLogs()
	return s
}

// keepLogs prints the engine logs' tails if the test fails, and copies the logs to
// $E2E_LOG_DIR/<test> when that is set.
func (s *scenario) keepLogs() { e2eharness.KeepLogs(s.t, s.dir) }

// config is the MirrorConfig the operator would render for this scenario.
func (s *scenario) config(mut func(*config.Config)) config.Config {
	c := e2eharness.Config(s.src.addrs(), s.dst.addrs(), s.group)
	c.Metrics = config.Metrics{Address: "0"}
	if mut != nil {
		mut(&c)
	}
	return c
}

// startEngine writes cfg and starts an engine process named name.
func (s *scenario) startEngine(name string, cfg config.Config) *engine {
	s.t.Helper()
	if cfg.Metrics.Address == "" || cfg.Metrics.Address == "0" {
		cfg.Metrics.Address = e2eharness.FreeAddr(s.t)
	}
	return e2eharness.StartEngine(s.t, name, e2eharness.WriteConfig(s.t, s.dir, name, cfg))
}

// stdWorkload is the standard workload over the scenario's topics.
func (s *scenario) stdWorkload(skip float64) audit.Workload {
	return e2eharness.Workload(s.topics, stdRecords, stdRate, skip)
}

// background is a workload being produced while the test injects faults.
type background = e2eharness.Background

// produce starts writing w to the source in the background.
func (s *scenario) produce(w audit.Workload) *background {
	return e2eharness.Produce(s.src.addrs(), w, 5*time.Minute, &s.refused)
}

// waitComplete reads the target until every expected record is there, failing the test
// with the audit table if that does not happen within completeTimeout.
func (s *scenario) waitComplete(p *audit.Produced, opts audit.Options) (*audit.Mirrored, audit.Report) {
	s.t.Helper()
	return e2eharness.WaitComplete(s.t, s.dst.addrs(), p, opts, completeTimeout)
}

// targetCount returns how many records the target holds in the scenario's topics.
func (s *scenario) targetCount() int64 { return e2eharness.Sum(s.dst.endOffsets(s.t, s.topics)) }

// waitProgress waits until the target holds at least `more` records beyond what it held
// when called, so a fault lands while the engine is mirroring, not while it starts.
func (s *scenario) waitProgress(more int64, timeout time.Duration) {
	s.t.Helper()
	e2eharness.WaitGrowth(s.t, more, timeout, s.targetCount)
}

// assertAudit fails the test unless the report is OK, and checks the duplicate bound.
func (s *scenario) assertAudit(rep audit.Report, maxDuplicates int) {
	s.t.Helper()
	e2eharness.AssertAudit(s.t, rep, s.refused, maxDuplicates)
}

// figures prints one line of the test's numbers, in a form docs/reliability.md quotes,
// and appends it as JSON to $E2E_RESULTS when set.
func (s *scenario) figures(rep audit.Report, extra map[string]any) {
	s.t.Helper()
	e2eharness.Figures(s.t, s.start, rep, extra)
}
