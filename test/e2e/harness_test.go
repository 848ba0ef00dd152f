//go:build e2e

package e2e

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
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The standard workload: 3 topics x 8 partitions, keyed, with headers and tombstones.
const (
	stdRecords      = 200_000
	stdRate         = 20_000 // records/s, so a run lasts ~10 s and faults land mid-stream
	stdPartitions   = 8
	stdNullFraction = 0.05
	commitInterval  = time.Second
	maxInFlight     = 500 // per partition
	completeTimeout = 3 * time.Minute

	// settleGrace is how long an engine that reported a fatal error gets to exit by
	// itself before the test stops it (engine.settle).
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
		group:  "kafka-mirror.e2e." + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "."),
		start:  time.Now(),
	}
	s.src.createTopics(t, topics, nil)
	s.dst.createTopics(t, topics, nil)
	s.keepLogs()
	return s
}

// keepLogs prints the engine logs' tails if the test fails, and copies the logs to
// $E2E_LOG_DIR/<test> when that is set.
func (s *scenario) keepLogs() {
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.dumpLogs()
		}
		dir := os.Getenv("E2E_LOG_DIR")
		if dir == "" {
			return
		}
		dst := filepath.Join(dir, strings.ReplaceAll(s.t.Name(), "/", "_"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return
		}
		entries, _ := os.ReadDir(s.dir)
		for _, en := range entries {
			if data, err := os.ReadFile(filepath.Join(s.dir, en.Name())); err == nil {
				_ = os.WriteFile(filepath.Join(dst, en.Name()), data, 0o644)
			}
		}
	})
}

// dumpLogs prints the tail of every engine log of a failed test.
func (s *scenario) dumpLogs() {
	paths, _ := os.ReadDir(s.dir)
	for _, p := range paths {
		if !strings.HasSuffix(p.Name(), ".log") {
			continue
		}
		s.t.Logf("--- %s (tail) ---\n%s", p.Name(), fileTail(s.dir+"/"+p.Name(), 30))
	}
}

// config is the MirrorConfig the operator would render for this scenario.
func (s *scenario) config(mut func(*config.Config)) config.Config {
	c := config.Config{
		Source:                  config.Cluster{BootstrapServers: s.src.addrs()},
		Target:                  config.Cluster{BootstrapServers: s.dst.addrs()},
		ConsumerGroup:           s.group,
		Topics:                  config.Topics{Include: []string{`e2e\..*`}},
		SyncTopics:              config.BoolPtr(false),
		Streams:                 2,
		OffsetCommitInterval:    config.Duration{Duration: commitInterval},
		DeliveryTimeout:         config.Duration{Duration: 30 * time.Second},
		TopicSyncInterval:       config.Duration{Duration: 2 * time.Second},
		MaxInFlightPerPartition: maxInFlight,
		Metrics:                 config.Metrics{Address: "0"},
	}
	if mut != nil {
		mut(&c)
	}
	return c
}

// startEngine writes cfg and starts an engine process named name.
func (s *scenario) startEngine(name string, cfg config.Config) *engine {
	s.t.Helper()
	if cfg.Metrics.Address == "" || cfg.Metrics.Address == "0" {
		cfg.Metrics.Address = freeAddr(s.t)
	}
	return startEngine(s.t, name, writeConfig(s.t, s.dir, name, cfg))
}

// stdWorkload is the standard workload over the scenario's topics.
func (s *scenario) stdWorkload(skip float64) audit.Workload {
	return audit.Workload{
		Topics:       s.topics,
		Records:      stdRecords,
		Rate:         stdRate,
		ValueSize:    100,
		NullFraction: stdNullFraction,
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.produced, b.err = audit.Produce(ctx, s.src.addrs(), w, func(n int) {
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

// waitComplete reads the target until every expected record is there, failing the test
// with the audit table if that does not happen within completeTimeout.
func (s *scenario) waitComplete(p *audit.Produced, opts audit.Options) (*audit.Mirrored, audit.Report) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	m, rep, err := audit.ReadUntilComplete(ctx, s.dst.addrs(), p, opts)
	if err != nil {
		s.t.Fatalf("the target never held every record: %v\n%s", err, rep)
	}
	return m, rep
}

// targetCount returns how many records the target holds in the scenario's topics.
func (s *scenario) targetCount() int64 {
	var n int64
	for _, ps := range s.dst.endOffsets(s.t, s.topics) {
		for _, o := range ps {
			n += o
		}
	}
	return n
}

// waitTarget blocks until the target holds at least n records or timeout passes.
func (s *scenario) waitTarget(n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s.targetCount() >= n {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
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

// figures prints one line of the test's numbers, in a form docs/reliability.md quotes,
// and appends it as JSON to $E2E_RESULTS when set.
func (s *scenario) figures(rep audit.Report, extra map[string]any) {
	s.t.Helper()
	f := map[string]any{
		"test":         s.t.Name(),
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
