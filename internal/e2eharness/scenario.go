package e2eharness

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

// Settings both suites' mirror configs share.
const (
	CommitInterval = time.Second
	MaxInFlight    = 500 // per partition
)

// GroupName is the mirror's consumer group in test t.
func GroupName(t *testing.T) string {
	return "kafka-mirror.e2e." + strings.ReplaceAll(strings.ToLower(t.Name()), "/", ".")
}

// Config is the MirrorConfig the operator would render for a scenario mirroring the
// topics e2e.* from src to dst as group, with the target topics already created.
func Config(src, dst []string, group string) config.Config {
	return config.Config{
		Source:                  config.Cluster{BootstrapServers: src},
		Target:                  config.Cluster{BootstrapServers: dst},
		ConsumerGroup:           group,
		Topics:                  config.Topics{Include: []string{`e2e\..*`}},
		SyncTopics:              config.BoolPtr(false),
		Streams:                 2,
		OffsetCommitInterval:    config.Duration{Duration: CommitInterval},
		DeliveryTimeout:         config.Duration{Duration: 30 * time.Second},
		TopicSyncInterval:       config.Duration{Duration: 2 * time.Second},
		MaxInFlightPerPartition: MaxInFlight,
	}
}

// Workload is the audited workload of most tests: records over topics at rate, keyed,
// with headers and 5 % tombstones, a fraction skip of them marked for the skip filter.
func Workload(topics map[string]int32, records, rate int, skip float64) audit.Workload {
	return audit.Workload{
		Topics:       topics,
		Records:      records,
		Rate:         rate,
		ValueSize:    100,
		NullFraction: 0.05,
		SkipFraction: skip,
		Seed:         time.Now().UnixNano(),
	}
}

// KeepLogs prints the tails of the engine logs in dir if the test fails, and copies
// dir to $E2E_LOG_DIR/<test> when that is set.
func KeepLogs(t *testing.T, dir string) {
	t.Cleanup(func() {
		if t.Failed() {
			entries, _ := os.ReadDir(dir)
			for _, en := range entries {
				if strings.HasSuffix(en.Name(), ".log") {
					t.Logf("--- %s (tail) ---\n%s", en.Name(), FileTail(filepath.Join(dir, en.Name()), 30))
				}
			}
		}
		keep := os.Getenv("E2E_LOG_DIR")
		if keep == "" {
			return
		}
		dst := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return
		}
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			if data, err := os.ReadFile(filepath.Join(dir, en.Name())); err == nil {
				_ = os.WriteFile(filepath.Join(dst, en.Name()), data, 0o644)
			}
		}
	})
}

// Background is a workload being produced while the test injects faults.
type Background struct {
	done     chan struct{}
	produced *audit.Produced
	err      error
	refused  *int
	mu       sync.Mutex
	sent     int
}

// Produce starts writing w to the cluster at addrs in the background, for at most
// timeout. Wait adds the records the cluster refused to *refused.
func Produce(addrs []string, w audit.Workload, timeout time.Duration, refused *int) *Background {
	b := &Background{done: make(chan struct{}), refused: refused}
	go func() {
		defer close(b.done)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		b.produced, b.err = audit.Produce(ctx, addrs, w, func(n int) {
			b.mu.Lock()
			b.sent = n
			b.mu.Unlock()
		})
	}()
	return b
}

// Done is closed when the workload has ended, for whatever reason.
func (b *Background) Done() <-chan struct{} { return b.done }

// Progress returns how many records were handed to the producer so far.
func (b *Background) Progress() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent
}

// WaitSent blocks until n records were sent or the workload ended.
func (b *Background) WaitSent(n int) {
	for b.Progress() < n {
		select {
		case <-b.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Wait returns the workload's acked records, failing the test if it could not finish.
func (b *Background) Wait(t *testing.T) *audit.Produced {
	t.Helper()
	<-b.done
	if b.err != nil {
		t.Fatalf("producing the workload: %v", b.err)
	}
	if b.produced.Failed > 0 {
		*b.refused += b.produced.Failed
		t.Logf("the source refused %d records (first: %v); they are not expected on the target", b.produced.Failed, b.produced.FirstError)
	}
	return b.produced
}

// WaitComplete reads the cluster at addrs until every record of p is there, failing
// the test with the audit table if that does not happen within timeout.
func WaitComplete(t *testing.T, addrs []string, p *audit.Produced, opts audit.Options, timeout time.Duration) (*audit.Mirrored, audit.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, rep, err := audit.ReadUntilComplete(ctx, addrs, p, opts)
	if err != nil {
		t.Fatalf("the target never held every record: %v\n%s", err, rep)
	}
	return m, rep
}

// AssertAudit fails the test unless the report is OK: nothing lost, no target record
// the source did not ack beyond the refused ones, at most maxDuplicates duplicates.
func AssertAudit(t *testing.T, rep audit.Report, refused, maxDuplicates int) {
	t.Helper()
	if !rep.OK() {
		t.Errorf("audit failed:\n%s", rep)
	}
	if rep.Total.Lost != 0 {
		t.Errorf("lost %d records; first missing: %v", rep.Total.Lost, rep.FirstMissing)
	}
	if rep.Unknown > refused {
		t.Errorf("%d target records were never acked by the source (the source refused %d)", rep.Unknown, refused)
	}
	if rep.Total.Duplicated > maxDuplicates {
		t.Errorf("%d duplicates, want at most %d", rep.Total.Duplicated, maxDuplicates)
	}
}

// Figures prints one line of the test's numbers (the audit's, the seconds since start,
// and extra), in the form docs/reliability.md quotes, and appends it as JSON to
// $E2E_RESULTS when set.
func Figures(t *testing.T, start time.Time, rep audit.Report, extra map[string]any) {
	t.Helper()
	f := map[string]any{
		"test":         t.Name(),
		"produced":     rep.Total.Produced,
		"mirrored":     rep.Total.Mirrored,
		"filtered":     rep.Total.Filtered,
		"lost":         rep.Total.Lost,
		"duplicated":   rep.Total.Duplicated,
		"out_of_order": rep.Total.OutOfOrder,
		"seconds":      time.Since(start).Round(100 * time.Millisecond).Seconds(),
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
	t.Logf("FIGURES%s", b.String())
	if path := os.Getenv("E2E_RESULTS"); path != "" {
		data, _ := json.Marshal(f)
		if fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fh.Write(append(data, '\n'))
			fh.Close()
		}
	}
}

// Sum adds up offsets by topic and partition (end offsets: the records a cluster
// holds; committed offsets: how far a group got).
func Sum(offsets map[string]map[int32]int64) int64 {
	var n int64
	for _, ps := range offsets {
		for _, o := range ps {
			n += o
		}
	}
	return n
}

// Partitions counts the partitions of a topic map.
func Partitions(topics map[string]int32) int {
	n := 0
	for _, p := range topics {
		n += int(p)
	}
	return n
}

// TopicNames returns the names of a topic map, sorted.
func TopicNames(topics map[string]int32) []string {
	var ts []string
	for t := range topics {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// WaitCompleteCommitted reads topics on the cluster at addrs read_committed (records of
// aborted or open transactions do not count) until every record of p is there, failing
// the test with the audit table if that does not happen within timeout. A failed read
// is retried until then: a broker may be restarting.
func WaitCompleteCommitted(t *testing.T, addrs, topics []string, p *audit.Produced, opts audit.Options, timeout time.Duration) audit.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := audit.NewReader(addrs, topics)
	r.ReadCommitted = true
	for {
		err := r.Poll(ctx)
		rep := audit.Audit(p, r.Mirrored(), opts)
		if err == nil && rep.Total.Lost == 0 {
			return rep
		}
		if ctx.Err() != nil {
			t.Fatalf("the target never held every record read_committed: %v\n%s", err, rep)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitGrowth waits until count, which starts at what it returns when called, has grown
// by more, so that a fault lands while the engine mirrors, not while it starts.
func WaitGrowth(t *testing.T, more int64, timeout time.Duration, count func() int64) {
	t.Helper()
	target := count() + more
	deadline := time.Now().Add(timeout)
	for count() < target {
		if time.Now().After(deadline) {
			t.Fatalf("the target did not grow by %d records within %v (it holds %d)", more, timeout, count())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitCommitted waits until the offsets committed returns sum to at least n.
func WaitCommitted(t *testing.T, n int64, timeout time.Duration, committed func() map[string]map[int32]int64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got int64
	for time.Now().Before(deadline) {
		if got = Sum(committed()); got >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the engine committed offsets summing to %d within %v, want at least %d", got, timeout, n)
}

// WaitMembers waits until members says group has n members in the Stable state, and
// returns n.
func WaitMembers(t *testing.T, group string, n int, timeout time.Duration, members func() (int, string)) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got int
	var state string
	for time.Now().Before(deadline) {
		if got, state = members(); got == n && state == "Stable" {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("group %s has %d members (%s), want %d Stable within %v", group, got, state, n, timeout)
	return got
}

// AssertCommittedEqualsTarget checks that, for every partition, the engine's committed
// source offset equals the target's end offset (preserve partitioning, no filter, an
// empty target at the start: the n-th source record is the n-th target record).
func AssertCommittedEqualsTarget(t *testing.T, when string, committed, targetEnds map[string]map[int32]int64) {
	t.Helper()
	bad := 0
	for topic, ps := range targetEnds {
		for p, end := range ps {
			c, ok := committed[topic][p]
			if (!ok && end == 0) || c == end {
				continue
			}
			if bad++; bad <= 5 {
				t.Errorf("%s: %s/%d committed %d (present %v), the target holds %d", when, topic, p, c, ok, end)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d partitions in all with a committed offset other than the target's end offset", when, bad)
	}
}

// LogTime returns the time of a JSON log line (zap's "ts", seconds since the epoch).
func LogTime(line string) (time.Time, bool) {
	var l struct {
		TS float64 `json:"ts"`
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.TS == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(l.TS*float64(time.Second))), true
}
