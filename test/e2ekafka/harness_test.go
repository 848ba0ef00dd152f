//go:build kafka

package e2ekafka

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
)

const (
	commitInterval = time.Second
	maxInFlight    = 500 // per partition
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
		group:  "kafka-mirror.e2e." + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "."),
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
	s.keepLogs()
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
	if err := c.WaitInSync(ctx, topicNames(topics)...); err != nil {
		t.Fatal(err)
	}
}

func topicNames(topics map[string]int32) []string {
	var ts []string
	for t := range topics {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// keepLogs prints the engine logs' tails if the test fails, and copies the directory to
// $E2E_LOG_DIR/<test> when that is set.
func (s *scenario) keepLogs() {
	s.t.Cleanup(func() {
		if s.t.Failed() {
			entries, _ := os.ReadDir(s.dir)
			for _, en := range entries {
				if strings.HasSuffix(en.Name(), ".log") {
					s.t.Logf("--- %s (tail) ---\n%s", en.Name(), fileTail(filepath.Join(s.dir, en.Name()), 30))
				}
			}
		}
		if dir := os.Getenv("E2E_LOG_DIR"); dir != "" {
			dst := filepath.Join(dir, strings.ReplaceAll(s.t.Name(), "/", "_"))
			_ = os.MkdirAll(dst, 0o755)
			entries, _ := os.ReadDir(s.dir)
			for _, en := range entries {
				if data, err := os.ReadFile(filepath.Join(s.dir, en.Name())); err == nil {
					_ = os.WriteFile(filepath.Join(dst, en.Name()), data, 0o644)
				}
			}
		}
	})
}

// config is the MirrorConfig the operator would render for this scenario.
func (s *scenario) config(mut func(*config.Config)) config.Config {
	c := config.Config{
		Source:                  config.Cluster{BootstrapServers: s.src.Addrs()},
		Target:                  config.Cluster{BootstrapServers: s.dst.Addrs()},
		ConsumerGroup:           s.group,
		Topics:                  config.Topics{Include: []string{`e2e\..*`}},
		SyncTopics:              config.BoolPtr(false),
		Streams:                 2,
		OffsetCommitInterval:    config.Duration{Duration: commitInterval},
		DeliveryTimeout:         config.Duration{Duration: 30 * time.Second},
		TopicSyncInterval:       config.Duration{Duration: 2 * time.Second},
		MaxInFlightPerPartition: maxInFlight,
	}
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
		cfg.Metrics.Address = freeAddr(s.t)
	}
	return startEngine(s.t, name, writeConfig(s.t, s.dir, name, cfg))
}

// startJoined starts an engine and waits until it joined the consumer group, so that
// a workload started next is mirrored as it is written and a fault lands mid-stream
// (an engine's first start can take long: see TestExactlyOnceFirstStartOnFreshTarget).
func (s *scenario) startJoined(name string, cfg config.Config) *engine {
	s.t.Helper()
	e := s.startEngine(name, cfg)
	deadline := time.Now().Add(joinTimeout)
	for len(e.logLines("Joined the consumer group")) == 0 {
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
	return audit.Workload{
		Topics:       s.topics,
		Records:      records,
		Rate:         rate,
		ValueSize:    100,
		NullFraction: 0.05,
		SkipFraction: skip,
		Seed:         time.Now().UnixNano(),
	}
}

// background is a workload being produced while the test injects faults.
type background struct {
	s        *scenario
	done     chan struct{}
	produced *audit.Produced
	err      error
	mu       sync.Mutex
	sent     int
}

// produce starts writing w to the source in the background.
func (s *scenario) produce(w audit.Workload) *background {
	b := &background{s: s, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		b.produced, b.err = audit.Produce(ctx, s.src.Addrs(), w, func(n int) {
			b.mu.Lock()
			b.sent = n
			b.mu.Unlock()
		})
	}()
	return b
}

// progress returns how many records were handed to the producer so far.
func (b *background) progress() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent
}

// waitSent blocks until n records were sent or the workload ended.
func (b *background) waitSent(n int) {
	for b.progress() < n {
		select {
		case <-b.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// wait returns the workload's acked records, failing the test if it could not finish.
func (b *background) wait(t *testing.T) *audit.Produced {
	t.Helper()
	<-b.done
	if b.err != nil {
		t.Fatalf("producing the workload: %v", b.err)
	}
	if b.produced.Failed > 0 {
		b.s.refused += b.produced.Failed
		t.Logf("the source refused %d records (first: %v); they are not expected on the target", b.produced.Failed, b.produced.FirstError)
	}
	return b.produced
}

// waitComplete reads the target until every expected record is there.
func (s *scenario) waitComplete(p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	_, rep, err := audit.ReadUntilComplete(ctx, s.dst.Addrs(), p, opts)
	if err != nil {
		s.t.Fatalf("the target never held every record: %v\n%s", err, rep)
	}
	return rep
}

// waitCompleteCommitted is waitComplete read_committed: records of aborted or open
// target transactions do not count.
func (s *scenario) waitCompleteCommitted(p *audit.Produced, opts audit.Options) audit.Report {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	r := audit.NewReader(s.dst.Addrs(), topicNames(s.topics))
	r.ReadCommitted = true
	for {
		err := r.Poll(ctx)
		rep := audit.Audit(p, r.Mirrored(), opts)
		if err == nil && rep.Total.Lost == 0 {
			return rep
		}
		if ctx.Err() != nil {
			s.t.Fatalf("the target never held every record read_committed: %v\n%s", err, rep)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// targetCount returns how many records the target holds (its end offsets' sum).
func (s *scenario) targetCount() int64 {
	s.t.Helper()
	var n int64
	for _, ps := range endOffsets(s.t, s.dst, s.topics) {
		for _, o := range ps {
			n += o
		}
	}
	return n
}

// waitProgress waits until the target holds at least `more` records beyond what it held
// when called, so that a fault lands while the engine mirrors, not while it starts.
func (s *scenario) waitProgress(more int64, timeout time.Duration) {
	s.t.Helper()
	target := s.targetCount() + more
	deadline := time.Now().Add(timeout)
	for s.targetCount() < target {
		if time.Now().After(deadline) {
			s.t.Fatalf("the target did not grow by %d records within %v (it holds %d)", more, timeout, s.targetCount())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// endOffsets returns the end offset of every partition of topics on c. It retries
// while a partition's leader is down (until the controller moves it) for up to
// faultTimeout.
func endOffsets(t *testing.T, c *realkafka.Cluster, topics map[string]int32) map[string]map[int32]int64 {
	t.Helper()
	var listed kadm.ListedOffsets
	err := retry(func(ctx context.Context) error {
		var err error
		listed, err = c.Admin().ListEndOffsets(ctx, topicNames(topics)...)
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

func committedSum(c map[string]map[int32]int64) int64 {
	var n int64
	for _, ps := range c {
		for _, o := range ps {
			n += o
		}
	}
	return n
}

// waitCommitted waits until the group's committed source offsets sum to at least n.
func (s *scenario) waitCommitted(n int64, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var got int64
	for time.Now().Before(deadline) {
		if got = committedSum(committed(s.t, s.src, s.group)); got >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("the engine committed offsets summing to %d within %v, want at least %d", got, timeout, n)
}

// assertAudit fails the test unless the report is OK, and checks the duplicate bound.
func (s *scenario) assertAudit(rep audit.Report, maxDuplicates int) {
	s.t.Helper()
	if !rep.OK() {
		s.t.Errorf("audit failed:\n%s", rep)
	}
	if rep.Total.Lost != 0 {
		s.t.Errorf("lost %d records; first missing: %v", rep.Total.Lost, rep.FirstMissing)
	}
	if rep.Unknown > s.refused {
		s.t.Errorf("%d target records were never acked by the source (the source refused %d)", rep.Unknown, s.refused)
	}
	if rep.Total.Duplicated > maxDuplicates {
		s.t.Errorf("%d duplicates, want at most %d", rep.Total.Duplicated, maxDuplicates)
	}
}

// figures prints one line of the test's numbers, in the form docs/reliability.md quotes,
// and appends it as JSON to $E2E_RESULTS when set.
func (s *scenario) figures(rep audit.Report, extra map[string]any) {
	s.t.Helper()
	f := map[string]any{
		"test":         s.t.Name(),
		"kafka":        realkafka.Version,
		"produced":     rep.Total.Produced,
		"mirrored":     rep.Total.Mirrored,
		"filtered":     rep.Total.Filtered,
		"lost":         rep.Total.Lost,
		"duplicated":   rep.Total.Duplicated,
		"out_of_order": rep.Total.OutOfOrder,
		"seconds":      time.Since(s.start).Round(100 * time.Millisecond).Seconds(),
	}
	for k, v := range extra {
		f[k] = v
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, f[k])
	}
	s.t.Logf("FIGURES%s", b.String())
	if path := os.Getenv("E2E_RESULTS"); path != "" {
		data, _ := json.Marshal(f)
		if fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fh.Write(append(data, '\n'))
			fh.Close()
		}
	}
}

// logTime returns the time of a JSON log line (zap's "ts", seconds since the epoch).
func logTime(line string) (time.Time, bool) {
	var l struct {
		TS float64 `json:"ts"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.TS == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(l.TS*float64(time.Second))), true
}
