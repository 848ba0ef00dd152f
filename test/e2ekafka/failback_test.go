//go:build kafka

package e2ekafka

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestDeclaredFailoverAndFailbackOnRealKafka is test/e2e's TestDeclaredFailback on real
// brokers: `kafka-mirror run` mirrors a workload and stops; `kafka-mirror failover
// --mode planned` cuts over and moves two groups; records are written to the target and
// the groups read on there (app-a everything, app-b one partition past the failback
// point and one not even up to it); then `kafka-mirror failback --from <group>` (with
// provenance) mirrors back. Both clusters hold every record of both phases exactly once:
// the source got exactly the records written to the target after the cutover and none
// of the originally mirrored ones again; both groups, moved back by the failback
// mirror's checkpoints, skip nothing and read nothing again on the source.
func TestDeclaredFailoverAndFailbackOnRealKafka(t *testing.T) {
	const (
		topic      = "e2e.failback"
		partitions = 2
		first      = 1000 // records per partition before the cutover
		after      = 300  // written to the target after it
	)
	// Real clusters have distinct random cluster ids: the failback mirror's
	// provenance tells them apart.
	s := newScenario(t, world{}, map[string]int32{topic: partitions})
	ctx := context.Background()
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
	commitGroup := func(c *realkafka.Cluster, group string, offs map[int32]int64) {
		t.Helper()
		o := kadm.Offsets{}
		for p, at := range offs {
			o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
		}
		if err := retry(func(ctx context.Context) error { return commitOffsets(ctx, c, group, o) }); err != nil {
			t.Fatalf("committing %s on %s: %v", group, c.Name(), err)
		}
	}
	groupAt := func(c *realkafka.Cluster, group string) map[int32]int64 {
		t.Helper()
		return committed(t, c, group)[topic]
	}
	produce := func(c *realkafka.Cluster, n int, run string, seed int64) *audit.Produced {
		t.Helper()
		p, err := audit.Produce(ctx, c.Addrs(), audit.Workload{Topics: s.topics, Records: n, Seed: seed, Run: run}, nil)
		if err != nil || p.Failed > 0 {
			t.Fatalf("producing %s to %s: %v (%d refused)", run, c.Name(), err, p.Failed)
		}
		return p
	}
	groups := &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Second}}

	// The way there.
	p1 := produce(s.src, partitions*first, "there", 1)
	commitGroup(s.src, "app-a", map[int32]int64{0: first, 1: first})
	commitGroup(s.src, "app-b", map[int32]int64{0: 400, 1: 700})
	cfg := s.config(func(c *config.Config) {
		c.Groups = groups
		c.Metrics.Address = e2eharness.FreeAddr(t)
	})
	cfgPath := e2eharness.WriteConfig(t, s.dir, "mirror", cfg)
	e := e2eharness.StartEngine(t, "mirror", cfgPath)
	waitFor(2*time.Minute, "the mirror committing everything", func() bool {
		c := groupAt(s.src, s.group)
		return c[0] == first && c[1] == first
	})
	e.StopCleanly(time.Minute)
	out, err := exec.Command(engineBinary(t), "failover", "--config", cfgPath, "-o", "json", "--mode", "planned", "--timeout", "2m").Output()
	var report mirror.FailoverReport
	if jerr := json.Unmarshal(out, &report); jerr != nil || err != nil || !report.Completed {
		t.Fatalf("planned failover: %v, report %v: %s", err, jerr, out)
	}
	for _, p := range report.Partitions {
		if p.TargetEnd != first || p.LeftBehind == nil || *p.LeftBehind != 0 {
			t.Fatalf("partition %d: %+v, want the failback point %d and 0 left behind", p.Partition, p, first)
		}
	}
	if got := groupAt(s.dst, "app-b"); got[0] != 400 || got[1] != 700 {
		t.Fatalf("app-b on the target after the failover: %v, want 400 and 700", got)
	}

	// On the target: producers write, the groups read on.
	p2 := produce(s.dst, partitions*after, "back", 2)
	onTarget := map[string]map[int32]int64{
		"app-a": {0: first + after, 1: first + after},
		"app-b": {0: 900, 1: first + 200}, // partition 0 below the failback point
	}
	for g, offs := range onTarget {
		commitGroup(s.dst, g, offs)
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
	back, err := engineproc.Start(exec.Command(engineBinary(t), "failback", "--config", rcfgPath, "--from", s.group, "--log-format", "json"),
		engineproc.Options{LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	failback := e2eharness.AdoptEngine(t, "failback", back)
	all := &audit.Produced{}
	all.Merge(p1)
	all.Merge(p2)
	if _, err := audit.ReadAll(ctx, s.src.Addrs(), []string{topic}, audit.ReadOptions{MinRecords: partitions * (first + after), Timeout: completeTimeout}); err != nil {
		t.Fatalf("the source never held both phases: %v\n%s", err, back.LogTail(20))
	}
	waitFor(2*time.Minute, "both groups checkpointed back on the source", func() bool {
		a, b := groupAt(s.src, "app-a"), groupAt(s.src, "app-b")
		return a[0] == first+after && a[1] == first+after && b[0] == 900 && b[1] == first+200
	})
	// A few more checkpoint rounds, which must leave app-b's partition 0 alone.
	time.Sleep(3 * time.Second)
	failback.StopCleanly(time.Minute)
	if plan, _ := os.ReadFile(logPath); !logHasAll(string(plan), "TO-COPY-BACK", "failback point", "left behind on the original source: none",
		"ORIGINAL-SOURCE-OFFSET", "translated by the checkpoints to 900, exactly, through the failed-over mirror's offset syncs (below the failback point)") {
		t.Errorf("the failback printed no plan:\n%s", e2eharness.FileTail(logPath, 20))
	}
	// Read again after the stop: nothing more came.
	mSrc, err := audit.ReadAll(ctx, s.src.Addrs(), []string{topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mDst, err := audit.ReadAll(ctx, s.dst.Addrs(), []string{topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The failback's copies carry its provenance header: content is compared on the
	// target only, where no copy has one.
	reps := map[string]audit.Report{
		"target": audit.Audit(all, mDst, audit.Options{}),
		"source": audit.Audit(all, mSrc, audit.Options{IgnoreContent: true}),
	}
	for name, rep := range reps {
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
	skippedAll, againAll := 0, 0
	for g, offs := range onTarget {
		onSource := groupAt(s.src, g)
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
			skippedAll += skipped
			againAll += again
			t.Logf("group %s partition %d: target offset %d, source offset %d: %d skipped, %d read again", g, p, dstOff, onSource[p], skipped, again)
			if skipped != 0 {
				t.Errorf("group %s partition %d: %d records skipped", g, p, skipped)
			}
		}
		// Translated exactly: the same offsets (each record has one offset on both
		// clusters here), nothing read again either.
		if onSource[0] != offs[0] || onSource[1] != offs[1] {
			t.Errorf("group %s on the source: %v, want %v", g, onSource, offs)
		}
	}
	s.figures(reps["source"], map[string]any{"target_lost": reps["target"].Total.Lost, "target_duplicated": reps["target"].Total.Duplicated,
		"copied_back": len(p2.Records), "group_skipped": skippedAll, "group_reread": againAll})
}

func logHasAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
