//go:build kafka

package e2ekafka

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	commitInterval = e2eharness.CommitInterval
	maxInFlight    = e2eharness.MaxInFlight // per partition
	// completeTimeout bounds the wait for the target to hold every record after the
	// workload ended: generous, since six JVMs and the engine share 2 cores.
	completeTimeout = 5 * time.Minute
	// adminTimeout bounds one admin request of the test itself.
	adminTimeout = 30 * time.Second
)

// scenario is one test's world: a source and a target cluster of real brokers, their
// topics, a directory for configs and engine logs, and the figures the test reports.
type scenario struct {
	t      *testing.T
	src    *realkafka.Cluster
	dst    *realkafka.Cluster
	dir    string
	topics map[string]int32
	group  string
	start  time.Time
	// refused counts workload records the source refused: such a record may still have
	// been written, and then shows up on the target as unknown.
	refused int
}

// world says which clusters a scenario runs on.
type world struct {
	// brokers per cluster: 1 (smoke) or 3 (replication factor 3, min.insync.replicas 2).
	brokers int
	// secure gives both clusters a SASL_SSL listener and the StandardAuthorizer.
	secure bool
	// noTargetTopics leaves the target topics to the engine's topic sync.
	noTargetTopics bool
	// topicConfigs are set on the topics created on both clusters.
	topicConfigs map[string]*string
	// srcConfig and dstConfig add server.properties entries.
	srcConfig, dstConfig map[string]string
}

// newScenario starts both clusters (at once: each JVM start is mostly waiting) and
// creates the topics with equal partition counts, as the operator's topic sync would
// before the engine starts.
func newScenario(t *testing.T, w world, topics map[string]int32) *scenario {
	t.Helper()
	engineBinary(t)
	if w.brokers == 0 {
		w.brokers = 1
	}
	s := &scenario{
		t:      t,
		dir:    t.TempDir(),
		topics: topics,
		group:  e2eharness.GroupName(t),
		start:  time.Now(),
	}
	cs := realkafka.StartTestClusters(t,
		realkafka.Options{Name: "source", Brokers: w.brokers, Secure: w.secure, Config: w.srcConfig},
		realkafka.Options{Name: "target", Brokers: w.brokers, Secure: w.secure, Config: w.dstConfig})
	s.src, s.dst = cs[0], cs[1]
	createTopics(t, s.src, topics, w.brokers, w.topicConfigs)
	if !w.noTargetTopics {
		createTopics(t, s.dst, topics, w.brokers, w.topicConfigs)
	}
	e2eharness.KeepLogs(t, s.dir)
	return s
}

// createTopics creates topics on c with replication factor rf.
func createTopics(t *testing.T, c *realkafka.Cluster, topics map[string]int32, rf int, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	for name, n := range topics {
		res, err := c.Admin().CreateTopic(ctx, n, int16(rf), configs, name)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatalf("creating topic %s on %s: %v", name, c.Name(), err)
		}
	}
	if err := c.WaitInSync(ctx, e2eharness.TopicNames(topics)...); err != nil {
		t.Fatal(err)
	}
}

// config is the MirrorConfig the operator would render for this scenario.
func (s *scenario) config(mut func(*config.Config)) config.Config {
	c := e2eharness.Config(s.src.Addrs(), s.dst.Addrs(), s.group)
	if mut != nil {
		mut(&c)
	}
	return c
}

// exactlyOnce sets delivery exactlyOnce with short transactions, as test/e2e does.
func exactlyOnce(c *config.Config) {
	c.Delivery = config.DeliveryExactlyOnce
	c.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
}

// startEngine writes cfg and starts an engine process named name.
func (s *scenario) startEngine(name string, cfg config.Config) *engine {
	s.t.Helper()
	if cfg.Metrics.Address == "" {
		cfg.Metrics.Address = e2eharness.FreeAddr(s.t)
	}
	return e2eharness.StartEngine(s.t, name, e2eharness.WriteConfig(s.t, s.dir, name, cfg))
}

// startJoined starts an engine and waits until it joined the consumer group, so that
// a workload started next is mirrored as it is written and a fault lands mid-stream
// (an engine's first start can take long: see TestExactlyOnceFirstStartOnFreshTarget).
func (s *scenario) startJoined(name string, cfg config.Config) *engine {
	s.t.Helper()
	e := s.startEngine(name, cfg)
	deadline := time.Now().Add(joinTimeout)
	for len(e.LogLines("Joined the consumer group")) == 0 {
		if !e.Running() || time.Now().After(deadline) {
			s.t.Fatalf("engine %s did not join its consumer group within %v (running %v); log tail:\n%s", name, joinTimeout, e.Running(), e.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return e
}

// joinTimeout bounds an engine's start up to its group join: well over deliveryTimeout,
// which a first exactly-once start on a fresh target waits today.
const joinTimeout = 3 * time.Minute

// workload is the workload of most tests: keyed records with headers and tombstones,
// at a rate that keeps faults mid-stream.
func (s *scenario) workload(records, rate int, skip float64) audit.Workload {
	return e2eharness.Workload(s.topics, records, rate, skip)
}

// background is a workload being produced while the test injects faults.
type background = e2eharness.Background

// produce starts writing w to the source in the background.
func (s *scenario) produce(w audit.Workload) *background {
	return e2eharness.Produce(s.src.Addrs(), w, 10*time.Minute, &s.refused)
}

// waitComplete reads the target until every expected record is there.
func (s *scenario) waitComplete(p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	_, rep := e2eharness.WaitComplete(s.t, s.dst.Addrs(), p, opts, completeTimeout)
	return rep
}

// waitCompleteCommitted is waitComplete read_committed: records of aborted or open
// target transactions do not count.
func (s *scenario) waitCompleteCommitted(p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	return e2eharness.WaitCompleteCommitted(s.t, s.dst.Addrs(), e2eharness.TopicNames(s.topics), p, opts, completeTimeout)
}

// targetCount returns how many records the target holds (its end offsets' sum).
func (s *scenario) targetCount() int64 {
	s.t.Helper()
	return e2eharness.Sum(endOffsets(s.t, s.dst, s.topics))
}

// waitProgress waits until the target holds at least `more` records beyond what it held
// when called, so that a fault lands while the engine mirrors, not while it starts.
func (s *scenario) waitProgress(more int64, timeout time.Duration) {
	s.t.Helper()
	e2eharness.WaitGrowth(s.t, more, timeout, s.targetCount)
}

// endOffsets returns the end offset of every partition of topics on c. It retries
// while a partition's leader is down (until the controller moves it) for up to
// faultTimeout.
func endOffsets(t *testing.T, c *realkafka.Cluster, topics map[string]int32) map[string]map[int32]int64 {
	t.Helper()
	var listed kadm.ListedOffsets
	err := retry(func(ctx context.Context) error {
		var err error
		listed, err = c.Admin().ListEndOffsets(ctx, e2eharness.TopicNames(topics)...)
		if err == nil {
			err = listed.Error()
		}
		return err
	})
	if err != nil {
		t.Fatalf("listing end offsets on %s: %v", c.Name(), err)
	}
	out := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out
}

// faultTimeout bounds how long the test's own admin requests retry through a broker
// fault: a dead leader is replaced after the controller's session timeout (9 s).
const faultTimeout = time.Minute

// retry calls f (each call bounded by adminTimeout) until it succeeds or faultTimeout
// passes, and returns the last error.
func retry(f func(ctx context.Context) error) error {
	deadline := time.Now().Add(faultTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// committed returns the offsets group committed on c, by topic and partition.
func committed(t *testing.T, c *realkafka.Cluster, group string) map[string]map[int32]int64 {
	t.Helper()
	var resp kadm.OffsetResponses
	err := retry(func(ctx context.Context) error {
		var err error
		resp, err = c.Admin().FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	if err != nil {
		t.Fatalf("fetching the offsets of group %s on %s: %v", group, c.Name(), err)
	}
	out := map[string]map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		if o.At >= 0 {
			out[o.Topic][o.Partition] = o.At
		}
	})
	return out
}

// waitCommitted waits until the group's committed source offsets sum to at least n.
func (s *scenario) waitCommitted(n int64, timeout time.Duration) {
	s.t.Helper()
	e2eharness.WaitCommitted(s.t, n, timeout, func() map[string]map[int32]int64 { return committed(s.t, s.src, s.group) })
}

// assertAudit fails the test unless the report is OK, and checks the duplicate bound.
func (s *scenario) assertAudit(rep audit.Report, maxDuplicates int) {
	s.t.Helper()
	e2eharness.AssertAudit(s.t, rep, s.refused, maxDuplicates)
}

// figures prints one line of the test's numbers (with the Kafka version), in the form
// docs/reliability.md quotes, and appends it as JSON to $E2E_RESULTS when set.
func (s *scenario) figures(rep audit.Report, extra map[string]any) {
	s.t.Helper()
	f := map[string]any{"kafka": realkafka.Version}
	maps.Copy(f, extra)
	e2eharness.Figures(s.t, s.start, rep, f)
}
