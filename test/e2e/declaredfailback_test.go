//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
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
	const topic = "e2e.failback"
	topics := map[string]int32{topic: 2}
	engineBinary(t)
	// Distinct cluster ids: the failback mirror's provenance tells the clusters apart.
	s := &scenario{t: t, src: newCluster(t, "source", 1, kfake.ClusterID("e2e-source")), dst: newCluster(t, "target", 1, kfake.ClusterID("e2e-target")),
		dir: t.TempDir(), topics: topics, group: "kafka-mirror.e2e.failback", start: time.Now()}
	s.src.createTopics(t, topics, nil)
	s.dst.createTopics(t, topics, nil)
	s.keepLogs()
	side := func(onTarget bool) *cluster {
		if onTarget {
			return s.dst
		}
		return s.src
	}
	rep, figures := e2eharness.DeclaredFailback(t, e2eharness.FailbackWorld{
		Topic: topic, Partitions: 2, Source: s.src.addrs(), Target: s.dst.addrs(), Group: s.group, Dir: s.dir,
		Config: s.config,
		Commit: func(onTarget bool, group string, offs map[int32]int64) {
			testutil.CommitOffsets(t, side(onTarget).addrs(), group, topic, offs, "")
		},
		Committed: func(onTarget bool, group string) map[int32]int64 {
			return committedSoFar(t, side(onTarget), group, topic)
		},
		CompleteTimeout: time.Minute,
	}, 1000, 300)
	s.figures(rep, figures)
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
