//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestDeclaredFailback runs the way there and back as processes: `kafka-mirror run`
// mirrors a workload, stops; `kafka-mirror failover --mode planned` cuts over and moves
// two groups; records are written to the target and the groups read on there (app-a
// everything, app-b one partition past the failback point and one not even up to it);
// then `kafka-mirror failback --from <group>` mirrors back. Audited with internal/audit:
// both clusters hold every record of both phases exactly once (0 lost, 0 duplicated: no
// record mirrored before the cutover came back), and both groups, moved back by the
// failback mirror's checkpoints, skip nothing on the source.
func TestDeclaredFailback(t *testing.T) {
	const (
		topic      = "e2e.failback"
		partitions = 2
		first      = 1000 // records per partition before the cutover
		after      = 300  // written to the target after it
	)
	topics := map[string]int32{topic: partitions}
	engineBinary(t)
	// Distinct cluster ids: the failback mirror's provenance tells the clusters apart.
	s := &scenario{t: t, src: newCluster(t, "source", 1, kfake.ClusterID("e2e-source")), dst: newCluster(t, "target", 1, kfake.ClusterID("e2e-target")),
		dir: t.TempDir(), topics: topics, group: "kafka-mirror.e2e.failback", start: time.Now()}
	s.src.createTopics(t, topics, nil)
	s.dst.createTopics(t, topics, nil)
	s.keepLogs()
	waitFor := func(timeout time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, timeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	ctx := context.Background()
	groups := &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Second}}

	// The way there.
	p1, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: topics, Records: partitions * first, Seed: 1, Run: "there"}, nil)
	if err != nil || p1.Failed > 0 {
		t.Fatalf("producing to the source: %v (%d refused)", err, p1.Failed)
	}
	testutil.CommitOffsets(t, s.src.addrs(), "app-a", topic, map[int32]int64{0: first, 1: first}, "")
	testutil.CommitOffsets(t, s.src.addrs(), "app-b", topic, map[int32]int64{0: 400, 1: 700}, "")
	cfg := s.config(func(c *config.Config) { c.Groups = groups })
	cfgPath := e2eharness.WriteConfig(t, s.dir, "mirror", cfg)
	e := s.startEngine("mirror", cfg)
	waitFor(time.Minute, "the mirror committing everything", func() bool {
		c := committedSoFar(t, s.src, s.group, topic)
		return c[0] == first && c[1] == first
	})
	e.StopCleanly(time.Minute)
	report, err := runFailoverCommand(t, cfgPath, "--mode", "planned", "--timeout", "2m")
	if err != nil || !report.Completed {
		t.Fatalf("planned failover: %v; report %+v", err, report)
	}
	for _, p := range report.Partitions {
		if p.TargetEnd != first || p.LeftBehind == nil || *p.LeftBehind != 0 {
			t.Fatalf("partition %d: %+v, want the failback point %d and 0 left behind", p.Partition, p, first)
		}
	}
	if got := committedSoFar(t, s.dst, "app-b", topic); got[0] != 400 || got[1] != 700 {
		t.Fatalf("app-b on the target after the failover: %v, want 400 and 700", got)
	}

	// On the target: producers write, the groups read on.
	p2, err := audit.Produce(ctx, s.dst.addrs(), audit.Workload{Topics: topics, Records: partitions * after, Seed: 2, Run: "back"}, nil)
	if err != nil || p2.Failed > 0 {
		t.Fatalf("producing to the target: %v (%d refused)", err, p2.Failed)
	}
	onTarget := map[string]map[int32]int64{
		"app-a": {0: first + after, 1: first + after},
		"app-b": {0: 900, 1: first + 200}, // partition 0 below the failback point
	}
	for g, offs := range onTarget {
		testutil.CommitOffsets(t, s.dst.addrs(), g, topic, offs, "")
	}

	// The way back.
	rcfg := s.config(func(c *config.Config) {
		c.Source, c.Target = c.Target, c.Source
		c.ConsumerGroup = s.group + ".back"
		c.Groups = groups
		c.Provenance = &config.Provenance{Enabled: true}
		c.Metrics.Address = e2eharness.FreeAddr(t)
	})
	rcfgPath := e2eharness.WriteConfig(t, s.dir, "reverse", rcfg)
	logPath := filepath.Join(s.dir, "failback.log")
	proc, err := engineproc.Start(exec.Command(engineBinary(t), "failback", "--config", rcfgPath, "--from", s.group, "--log-format", "json"),
		engineproc.Options{LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	back := e2eharness.AdoptEngine(t, "failback", proc)
	all := &audit.Produced{}
	all.Merge(p1)
	all.Merge(p2)
	mSrc, err := audit.ReadAll(ctx, s.src.addrs(), []string{topic}, audit.ReadOptions{MinRecords: partitions * (first + after), Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("the source never held both phases: %v", err)
	}
	waitFor(time.Minute, "both groups checkpointed back on the source", func() bool {
		a, b := committedSoFar(t, s.src, "app-a", topic), committedSoFar(t, s.src, "app-b", topic)
		return a[0] == first+after && a[1] == first+after && b[0] == 900 && b[1] == first+200
	})
	// A few more checkpoint rounds, which must leave app-b's partition 0 alone.
	time.Sleep(3 * time.Second)
	back.StopCleanly(time.Minute)
	if plan, _ := os.ReadFile(logPath); !containsAll(string(plan), "TO-COPY-BACK", "failback point", "left behind on the original source: none",
		"ORIGINAL-SOURCE-OFFSET", "translated by the checkpoints to 900, exactly, through the failed-over mirror's offset syncs (below the failback point)") {
		t.Errorf("the failback printed no plan:\n%s", e2eharness.FileTail(logPath, 20))
	}
	// Read again after the stop: nothing more came.
	mSrc, err = audit.ReadAll(ctx, s.src.addrs(), []string{topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mDst, err := audit.ReadAll(ctx, s.dst.addrs(), []string{topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The failback's copies carry its provenance header: content is compared on the
	// target only, where no copy has one.
	for name, rep := range map[string]audit.Report{
		"target": audit.Audit(all, mDst, audit.Options{}),
		"source": audit.Audit(all, mSrc, audit.Options{IgnoreContent: true}),
	} {
		t.Logf("%s:\n%s", name, rep.Summary())
		if !rep.OK() || rep.Total.Lost != 0 || rep.Total.Duplicated != 0 || rep.Unknown != 0 || rep.Target != partitions*(first+after) {
			t.Errorf("the %s cluster: %d lost, %d duplicated, %d unknown, %d records, want every record of both phases once\n%s",
				name, rep.Total.Lost, rep.Total.Duplicated, rep.Unknown, rep.Target, rep)
		}
	}

	// Nothing skipped: every record a group had not read on the target (at or after
	// its target offset) is at or after its offset on the source.
	offsetOf := func(m *audit.Mirrored) map[string]int64 {
		out := map[string]int64{}
		for _, r := range m.Records {
			out[r.ID] = r.Offset
		}
		return out
	}
	srcAt, dstAt := offsetOf(mSrc), offsetOf(mDst)
	for g, offs := range onTarget {
		onSource := committedSoFar(t, s.src, g, topic)
		for p, dstOff := range offs {
			skipped, again := 0, 0
			for _, r := range mDst.Records {
				if r.Partition != p {
					continue
				}
				unread := dstAt[r.ID] >= dstOff
				switch srcOff := srcAt[r.ID]; {
				case unread && srcOff < onSource[p]:
					skipped++
				case !unread && srcOff >= onSource[p]:
					again++
				}
			}
			t.Logf("group %s partition %d: target offset %d, source offset %d: %d skipped, %d read again", g, p, dstOff, onSource[p], skipped, again)
			if skipped != 0 {
				t.Errorf("group %s partition %d: %d records skipped", g, p, skipped)
			}
		}
	}
	// Every group offset translated exactly: nothing read again either.
	for g, offs := range onTarget {
		if got := committedSoFar(t, s.src, g, topic); got[0] != offs[0] || got[1] != offs[1] {
			t.Errorf("group %s on the source: %v, want %v (the same offsets here: each record has one offset on both clusters)", g, got, offs)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestDeclaredFailbackAfterImmediateFailover: the mirror stops, the source is written
// on (those records are left behind), then cut off; `kafka-mirror failover --mode
// immediate` runs without it; records are written to the target. Once the source is
// back, `kafka-mirror failback --plan-only -o json` lists per partition the left-behind
// range, which equals what an audit finds missing on the target, and `kafka-mirror
// failback` copies back exactly the records written to the target after the cutover:
// the source holds every record once (its own, the left-behind ones where they were,
// and the target's new ones), none mirrored back twice.
func TestDeclaredFailbackAfterImmediateFailover(t *testing.T) {
	const (
		topic      = "e2e.failback.immediate"
		partitions = 2
	)
	topics := map[string]int32{topic: partitions}
	engineBinary(t)
	s := &scenario{t: t, src: newCluster(t, "source", 1, kfake.ClusterID("e2e-source")), dst: newCluster(t, "target", 1, kfake.ClusterID("e2e-target")),
		dir: t.TempDir(), topics: topics, group: "kafka-mirror.e2e.failback-immediate", start: time.Now()}
	s.src.createTopics(t, topics, nil)
	s.dst.createTopics(t, topics, nil)
	s.keepLogs()
	ctx := context.Background()
	produce := func(c *cluster, n int, run string, seed int64) *audit.Produced {
		t.Helper()
		p, err := audit.Produce(ctx, c.addrs(), audit.Workload{Topics: topics, Records: n, Seed: seed, Run: run}, nil)
		if err != nil || p.Failed > 0 {
			t.Fatalf("producing %s: %v (%d refused)", run, err, p.Failed)
		}
		return p
	}
	mirrored := produce(s.src, 1200, "mirrored", 1)
	cfg := s.config(func(c *config.Config) {
		c.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Second}}
	})
	cfgPath := e2eharness.WriteConfig(t, s.dir, "mirror", cfg)
	e := s.startEngine("mirror", cfg)
	deadline := time.Now().Add(time.Minute)
	for c := committedSoFar(t, s.src, s.group, topic); c[0]+c[1] < 1200; c = committedSoFar(t, s.src, s.group, topic) {
		if time.Now().After(deadline) {
			t.Fatalf("the mirror committed %v within a minute, want 1200 records", c)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.StopCleanly(time.Minute)
	leftBehind := produce(s.src, 300, "left", 2)
	s.src.disable()
	report, err := runFailoverCommand(t, cfgPath, "--mode", "immediate", "--timeout", "5s")
	if err != nil || !report.Completed || report.SourceReachable {
		t.Fatalf("immediate failover without the source: %v; report %+v", err, report)
	}
	afterCutover := produce(s.dst, 400, "after", 3)
	s.src.enable(t)

	rcfg := s.config(func(c *config.Config) {
		c.Source, c.Target = c.Target, c.Source
		c.ConsumerGroup = s.group + ".back"
		c.Provenance = &config.Provenance{Enabled: true}
		c.Metrics.Address = e2eharness.FreeAddr(t)
	})
	rcfgPath := e2eharness.WriteConfig(t, s.dir, "reverse", rcfg)
	out, err := exec.Command(engineBinary(t), "failback", "--config", rcfgPath, "--from", s.group, "--plan-only", "-o", "json").Output()
	if err != nil {
		t.Fatalf("failback --plan-only: %v\n%s", err, out)
	}
	var plan mirror.FailbackPlan
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("the plan is not JSON: %v\n%s", err, out)
	}
	mDst, err := audit.ReadAll(ctx, s.dst.addrs(), []string{topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	missing := audit.Audit(leftBehind, mDst, audit.Options{})
	listed := map[int32]int64{}
	for _, lb := range plan.LeftBehind {
		listed[lb.Partition] = lb.Count
	}
	for _, pr := range missing.Partitions {
		if listed[pr.Partition] != int64(pr.Lost) || pr.Lost == 0 {
			t.Errorf("partition %d: the plan lists %d left behind, the audit finds %d missing on the target (plan %+v)", pr.Partition, listed[pr.Partition], pr.Lost, plan.LeftBehind)
		}
	}
	for _, pp := range plan.Partitions {
		if pp.StartFrom != "failback point" || pp.ToCopy <= 0 {
			t.Errorf("plan partition %+v, want a start at the failback point with records to copy back", pp)
		}
	}

	proc, err := engineproc.Start(exec.Command(engineBinary(t), "failback", "--config", rcfgPath, "--from", s.group, "--log-format", "json"),
		engineproc.Options{LogPath: filepath.Join(s.dir, "failback.log")})
	if err != nil {
		t.Fatal(err)
	}
	back := e2eharness.AdoptEngine(t, "failback", proc)
	want := len(mirrored.Records) + len(leftBehind.Records) + len(afterCutover.Records)
	mSrc, err := audit.ReadAll(ctx, s.src.addrs(), []string{topic}, audit.ReadOptions{MinRecords: want, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("the source never held every record: %v", err)
	}
	// Let the failback mirror run on for a moment: nothing more may come.
	time.Sleep(3 * time.Second)
	back.StopCleanly(time.Minute)
	if mSrc, err = audit.ReadAll(ctx, s.src.addrs(), []string{topic}, audit.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	// The source's own records (mirrored and left behind) and the copies of the
	// target's are audited apart: their offsets come from different clusters.
	own := &audit.Produced{}
	own.Merge(mirrored)
	own.Merge(leftBehind)
	ownOnSource, copies := &audit.Mirrored{Ends: mSrc.Ends}, &audit.Mirrored{Ends: mSrc.Ends}
	for _, r := range mSrc.Records {
		if strings.Contains(r.ID, "/after.") {
			copies.Records = append(copies.Records, r)
		} else {
			ownOnSource.Records = append(ownOnSource.Records, r)
		}
	}
	if len(mSrc.Records) != want {
		t.Errorf("the source holds %d records, want %d", len(mSrc.Records), want)
	}
	for name, rep := range map[string]audit.Report{
		"its own records":                         audit.Audit(own, ownOnSource, audit.Options{}),
		"the target's, written after the cutover": audit.Audit(afterCutover, copies, audit.Options{IgnoreContent: true}),
	} {
		t.Logf("source, %s:\n%s", name, rep.Summary())
		if !rep.OK() || rep.Total.Lost != 0 || rep.Total.Duplicated != 0 || rep.Unknown != 0 {
			t.Errorf("the source, %s: %d lost, %d duplicated, %d unknown, want each once\n%s", name, rep.Total.Lost, rep.Total.Duplicated, rep.Unknown, rep)
		}
	}
}
