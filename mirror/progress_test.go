package mirror

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// logLines is a logger that logs to the test and keeps every line, so a test can
// assert on what the engine said.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func newLogLines(t *testing.T) (*logLines, logr.Logger) {
	l := &logLines{}
	return l, funcr.New(func(prefix, args string) {
		t.Log(prefix, args)
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// count returns how many lines contain every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// progressOffsets reads the target-side progress group's offsets of testTopic.
func progressOffsets(t *testing.T, c *testClusters, group string, partitions int32) map[int32]int64 {
	t.Helper()
	admin := targetAdmin(t, c)
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(ProgressGroup(group), map[string][]int32{testTopic: parts})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		if b := resp.GetBlock(testTopic, p); b != nil && b.Offset >= 0 {
			out[p] = b.Offset
		}
	}
	return out
}

// TestResumeFromTargetAfterSourceOffsetsExpired mirrors N records per partition and
// stops cleanly, then deletes the source group (what offsets.retention.minutes does
// to the group of a mirror paused too long), produces M more and restarts: the engine
// must resume every partition from the target-side progress, so the target holds all
// N+M records exactly once, and say so in the log, the metric and Stats.
func TestResumeFromTargetAfterSourceOffsetsExpired(t *testing.T) {
	const (
		partitions = 4
		n, m       = 500, 300
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, n)
	cfg := c.testConfig(t)

	first := startEngine(t, cfg, testLogger(t).WithName("first"))
	testutil.WaitFor(t, 30*time.Second, "every partition committed at N", func() bool {
		s := first.e.Stats()
		done := 0
		for _, p := range s.Partitions {
			if p.Committed == n {
				done++
			}
		}
		return done == partitions
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := progressOffsets(t, c, cfg.ConsumerGroup, partitions); len(got) != partitions {
		t.Fatalf("target-side progress after a clean stop: %v, want %d for each of %d partitions", got, n, partitions)
	} else {
		for p, off := range got {
			if off != n {
				t.Fatalf("target-side progress of partition %d is %d, want %d", p, off, n)
			}
		}
	}

	if err := sourceAdmin(t, c).DeleteConsumerGroup(cfg.ConsumerGroup); err != nil {
		t.Fatal(err)
	}
	if _, err := sourceAdmin(t, c).ListConsumerGroupOffsets(cfg.ConsumerGroup, map[string][]int32{testTopic: {0}}); !errors.Is(err, sarama.ErrGroupIDNotFound) {
		t.Fatalf("reading the source group's offsets after its deletion: %v, want %v", err, sarama.ErrGroupIDNotFound)
	}
	w.produce(t, c.source, m)

	logs, log := newLogLines(t)
	second := startEngine(t, c.testConfig(t), log.WithName("second"))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 40*time.Second)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after the source group's offsets were deleted: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	testutil.WaitFor(t, 20*time.Second, "the source group re-seeded at N+M", func() bool {
		off := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions)
		for p := int32(0); p < partitions; p++ {
			if off[p] != n+m {
				return false
			}
		}
		return true
	})
	s := second.e.Stats()
	for _, p := range s.Partitions {
		if p.ResumedFromTarget < 1 {
			t.Errorf("partition %d: ResumedFromTarget %d, want at least 1", p.Partition, p.ResumedFromTarget)
		}
	}
	if lines := logs.count("Resumed from the target-side progress", `"offset"=500`); lines < partitions {
		t.Errorf("%d log lines say a partition resumed from the target-side progress at offset %d, want at least %d", lines, n, partitions)
	}
	if lines := logs.count("Started partition at initialOffset"); lines != 0 {
		t.Errorf("%d partitions started at initialOffset although the target knew their progress", lines)
	}
	mfs, err := second.e.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var resumed float64
	for _, mf := range mfs {
		if mf.GetName() == metricResumed {
			for _, mm := range mf.GetMetric() {
				resumed += mm.GetCounter().GetValue()
			}
		}
	}
	if resumed < partitions || int64(resumed) != s.ResumedFromTarget {
		t.Errorf("%s sums to %v, want at least %d and equal to Stats.ResumedFromTarget (%d)", metricResumed, resumed, partitions, s.ResumedFromTarget)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("source group deleted after %d records per partition, %d more produced: %d records on the target, 0 lost, 0 duplicates, %d partition resumes from the target",
		n, m, res.records, s.ResumedFromTarget)
}

// TestSourceGroupOffsetWinsOverTargetProgress moves the source group's offset of one
// partition back below the target-side progress (a person asking for a re-mirror):
// the source offset must win, and only that partition's records from there are
// mirrored again.
func TestSourceGroupOffsetWinsOverTargetProgress(t *testing.T) {
	const (
		partitions = 2
		n, rewind  = 200, 150
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, n)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	first := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 30*time.Second, "everything committed", func() bool {
		s := first.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == n && s.Partitions[1].Committed == n
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := progressOffsets(t, c, cfg.ConsumerGroup, partitions); got[0] != n || got[1] != n {
		t.Fatalf("target-side progress %v, want %d for both partitions", got, n)
	}
	// Commit partition 0 of the source group back to rewind, as a reset would.
	om, err := sarama.NewOffsetManagerFromClient(cfg.ConsumerGroup, sourceClient(t, c))
	if err != nil {
		t.Fatal(err)
	}
	pom, err := om.ManagePartition(testTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	pom.ResetOffset(rewind, "")
	om.Commit()
	_ = pom.Close()
	_ = om.Close()
	if got := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions); got[0] != rewind || got[1] != n {
		t.Fatalf("source group offsets %v after the reset, want 0:%d 1:%d", got, rewind, n)
	}

	logs, log := newLogLines(t)
	second := startEngine(t, cfg, log)
	got := readTarget(t, c.target, testTopic, w.total()+(n-rewind), 2*time.Second, 40*time.Second)
	res := audit(t, w, got, true, false)
	if res.missing != 0 || res.duplicates != n-rewind || res.dupsPerPartition[0] != n-rewind {
		t.Fatalf("after rewinding the source group of partition 0 to %d: %+v, want %d duplicates, all in partition 0", rewind, res, n-rewind)
	}
	if s := second.e.Stats(); s.ResumedFromTarget != 0 || logs.count("Resumed from the target-side progress") != 0 {
		t.Fatalf("the engine resumed from the target although the source group had offsets (Stats %d)", s.ResumedFromTarget)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestInitialOffsetLatest starts without any source group offset and without any
// target-side progress, with initialOffset latest: records produced before the
// partitions were assigned are not mirrored, those produced after are, exactly once,
// and the log says where each partition started.
func TestInitialOffsetLatest(t *testing.T) {
	const (
		partitions    = 2
		before, after = 200, 150
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	// One stream: with more, a partition handed from one stream to another before any
	// commit would start at "latest" again, skipping what came in between, as any
	// consumer group does with auto.offset.reset=latest.
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.InitialOffset = config.InitialOffsetLatest
		cfg.Streams = 1
	})
	logs, log := newLogLines(t)
	r := startEngine(t, cfg, log)
	testutil.WaitFor(t, 30*time.Second, "both partitions assigned", func() bool {
		s := r.e.Stats()
		return s.Ready && len(s.Partitions) == partitions && s.Partitions[0].Assigned && s.Partitions[1].Assigned
	})
	w.produce(t, c.source, after)
	got := readTarget(t, c.target, testTopic, partitions*after, 2*time.Second, 30*time.Second)
	for p := int32(0); p < partitions; p++ {
		if len(got[p]) != after {
			t.Fatalf("target partition %d holds %d records, want the %d produced after the start", p, len(got[p]), after)
		}
		for i, rec := range got[p] {
			if sp, idx := recordID(t, rec); sp != p || idx != before+i {
				t.Fatalf("target partition %d record %d is source record %d/%d, want %d/%d", p, i, sp, idx, p, before+i)
			}
		}
	}
	if lines := logs.count("Started partition at initialOffset", `"initialOffset"="latest"`); lines != partitions {
		t.Errorf("%d log lines say a partition started at initialOffset latest, want %d", lines, partitions)
	}
	if s := r.e.Stats(); s.ResumedFromTarget != 0 {
		t.Errorf("ResumedFromTarget %d without any target-side progress", s.ResumedFromTarget)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("initialOffset latest: %d records per partition before the start skipped, %d after mirrored once", before, after)
}

func sourceClient(t *testing.T, c *testClusters) sarama.Client {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	cl, err := sarama.NewClient(c.source.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestResumeWaitsForUnreadableTargetProgress makes the target-side group unreadable
// for a while (COORDINATOR_NOT_AVAILABLE on its OffsetFetch) after the source group was
// deleted: the engine must not guess a starting offset (it would re-mirror from the
// oldest), so no record is mirrored while the progress cannot be read; once it can,
// the engine resumes from it with nothing lost or duplicated.
func TestResumeWaitsForUnreadableTargetProgress(t *testing.T) {
	const (
		partitions = 2
		n, m       = 200, 100
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, n)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	first := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 30*time.Second, "everything committed", func() bool {
		s := first.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == n && s.Partitions[1].Committed == n
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := sourceAdmin(t, c).DeleteConsumerGroup(cfg.ConsumerGroup); err != nil {
		t.Fatal(err)
	}
	w.produce(t, c.source, m)

	fault := c.target.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: ProgressGroup(cfg.ConsumerGroup),
		Err: kerr.CoordinatorNotAvailable, Count: -1})
	logs, log := newLogLines(t)
	second := startEngine(t, cfg, log)
	testutil.WaitFor(t, 20*time.Second, "two failed look-ups of the target-side progress", func() bool {
		return logs.count("while reading the offsets of source group", "coordinator is not available") >= 2
	})
	if s := second.e.Stats(); s.Records != 0 || s.InFlight != 0 {
		t.Fatalf("the engine mirrored %d records (%d in flight) while it could not read the target-side progress", s.Records, s.InFlight)
	}
	fault.Remove()
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 60*time.Second)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after the target-side progress became readable: %d records on the target, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	if s := second.e.Stats(); s.ResumedFromTarget < partitions {
		t.Fatalf("ResumedFromTarget %d, want at least %d", s.ResumedFromTarget, partitions)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestTargetProgressNotAuthorizedStartsAtInitialOffset denies the mirror Read on the
// target-side group (GROUP_AUTHORIZATION_FAILED on its OffsetFetch): waiting cannot
// help, so a new mirror must still start (at initialOffset) and mirror everything once,
// and the log must say which permission is missing.
func TestTargetProgressNotAuthorizedStartsAtInitialOffset(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 300)
	cfg := c.testConfig(t)
	c.target.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: ProgressGroup(cfg.ConsumerGroup),
		Err: kerr.GroupAuthorizationFailed, Count: -1})
	logs, log := newLogLines(t)
	r := startEngine(t, cfg, log)
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 30*time.Second)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("with the target-side group unreadable: %+v, want %d records, 0 missing, 0 duplicates", res, w.total())
	}
	if n := logs.count("Cannot read the target-side progress", "grant the mirror's target principal Read on this group"); n == 0 {
		t.Fatal("no log line says that the target-side progress cannot be read and which permission is missing")
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
