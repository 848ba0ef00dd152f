package e2eharness

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
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// FailbackWorld is what DeclaredFailback needs of a suite: its two clusters (with
// distinct cluster ids, which the failback mirror's provenance tells apart), holding
// Topic with Partitions partitions each, and how it configures and starts engines.
type FailbackWorld struct {
	Topic      string
	Partitions int32
	Source     []string
	Target     []string
	// Group is the forward mirror's consumer group; Dir holds configs and logs.
	Group, Dir string
	// Config is the suite's MirrorConfig with mut applied (Source and Target as above).
	Config func(mut func(*config.Config)) config.Config
	// Commit commits offs of Topic for group on the source or, with onTarget, the
	// target; Committed reads them back (none: an empty map).
	Commit    func(onTarget bool, group string, offs map[int32]int64)
	Committed func(onTarget bool, group string) map[int32]int64
	// CompleteTimeout bounds the waits for a whole phase (slower on real brokers).
	CompleteTimeout time.Duration
}

// DeclaredFailback runs the way there and back as processes: `kafka-mirror run`
// mirrors first records per partition and stops; `kafka-mirror failover --mode
// planned` cuts over and moves two groups; after records per partition are written to
// the target and the groups read on there (app-a everything, app-b one partition past
// the failback point and one not even up to it); then `kafka-mirror failback --from
// <group>` (with provenance) mirrors back. It fails t unless both clusters hold every
// record of both phases exactly once (none mirrored before the cutover came back), and
// both groups, moved back by the failback mirror's checkpoints, skip nothing and read
// nothing again on the source. It returns the source's audit and figures for the
// suite's report.
func DeclaredFailback(t *testing.T, w FailbackWorld, first, after int) (audit.Report, map[string]any) {
	t.Helper()
	ctx := context.Background()
	topics := map[string]int32{w.Topic: w.Partitions}
	produce := func(addrs []string, n int, run string, seed int64) *audit.Produced {
		t.Helper()
		p, err := audit.Produce(ctx, addrs, audit.Workload{Topics: topics, Records: n, Seed: seed, Run: run}, nil)
		if err != nil || p.Failed > 0 {
			t.Fatalf("producing %s to %v: %v (%d refused)", run, addrs, err, p.Failed)
		}
		return p
	}
	all := func(n int64) map[int32]int64 {
		out := map[int32]int64{}
		for p := range w.Partitions {
			out[p] = n
		}
		return out
	}
	equal := func(got, want map[int32]int64) bool {
		for p := range w.Partitions {
			if got[p] != want[p] {
				return false
			}
		}
		return true
	}
	groups := &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Second}}

	// The way there.
	p1 := produce(w.Source, int(w.Partitions)*first, "there", 1)
	w.Commit(false, "app-a", all(int64(first)))
	w.Commit(false, "app-b", map[int32]int64{0: 400, 1: 700})
	cfg := w.Config(func(c *config.Config) {
		c.Groups = groups
		c.Metrics.Address = FreeAddr(t)
	})
	cfgPath := WriteConfig(t, w.Dir, "mirror", cfg)
	e := StartEngine(t, "mirror", cfgPath)
	testutil.WaitFor(t, w.CompleteTimeout, "the mirror committing everything", func() bool {
		return equal(w.Committed(false, w.Group), all(int64(first)))
	})
	e.StopCleanly(time.Minute)
	out, err := exec.Command(os.Getenv(BinaryEnv), "failover", "--config", cfgPath, "-o", "json", "--mode", "planned", "--timeout", "2m").Output()
	var report mirror.FailoverReport
	if jerr := json.Unmarshal(out, &report); jerr != nil || err != nil || !report.Completed {
		t.Fatalf("planned failover: %v, report %v: %s", err, jerr, out)
	}
	for _, p := range report.Partitions {
		if p.TargetEnd != int64(first) || p.LeftBehind == nil || *p.LeftBehind != 0 {
			t.Fatalf("partition %d: %+v, want the failback point %d and 0 left behind", p.Partition, p, first)
		}
	}
	if got := w.Committed(true, "app-b"); got[0] != 400 || got[1] != 700 {
		t.Fatalf("app-b on the target after the failover: %v, want 400 and 700", got)
	}

	// On the target: producers write, the groups read on.
	p2 := produce(w.Target, int(w.Partitions)*after, "back", 2)
	onTarget := map[string]map[int32]int64{
		"app-a": all(int64(first + after)),
		"app-b": {0: 900, 1: int64(first + 200)}, // partition 0 below the failback point
	}
	for g, offs := range onTarget {
		w.Commit(true, g, offs)
	}

	// The way back.
	rcfg := w.Config(func(c *config.Config) {
		c.Source, c.Target = c.Target, c.Source
		c.ConsumerGroup = w.Group + ".back"
		c.Groups = groups
		c.Provenance = &config.Provenance{Enabled: true}
		c.Metrics.Address = FreeAddr(t)
	})
	rcfgPath := WriteConfig(t, w.Dir, "reverse", rcfg)
	logPath := filepath.Join(w.Dir, "failback.log")
	proc, err := engineproc.Start(exec.Command(os.Getenv(BinaryEnv), "failback", "--config", rcfgPath, "--from", w.Group, "--log-format", "json"),
		engineproc.Options{LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	back := AdoptEngine(t, "failback", proc)
	both := &audit.Produced{}
	both.Merge(p1)
	both.Merge(p2)
	if _, err := audit.ReadAll(ctx, w.Source, []string{w.Topic}, audit.ReadOptions{MinRecords: int(w.Partitions) * (first + after), Timeout: w.CompleteTimeout}); err != nil {
		t.Fatalf("the source never held both phases: %v\n%s", err, back.LogTail(20))
	}
	testutil.WaitFor(t, w.CompleteTimeout, "both groups checkpointed back on the source", func() bool {
		return equal(w.Committed(false, "app-a"), onTarget["app-a"]) && equal(w.Committed(false, "app-b"), onTarget["app-b"])
	})
	// A few more checkpoint rounds, which must leave app-b's partition 0 alone.
	time.Sleep(3 * time.Second)
	back.StopCleanly(time.Minute)
	if plan, _ := os.ReadFile(logPath); !containsAll(string(plan), "TO-COPY-BACK", "failback point", "left behind on the original source: none",
		"ORIGINAL-SOURCE-OFFSET", "translated by the checkpoints to 900, exactly, through the failed-over mirror's offset syncs (below the failback point)") {
		t.Errorf("the failback printed no plan:\n%s", FileTail(logPath, 20))
	}

	// Read again after the stop: nothing more came.
	mSrc, err := audit.ReadAll(ctx, w.Source, []string{w.Topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mDst, err := audit.ReadAll(ctx, w.Target, []string{w.Topic}, audit.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The failback's copies carry its provenance header: content is compared on the
	// target only, where no copy has one.
	reps := map[string]audit.Report{
		"target": audit.Audit(both, mDst, audit.Options{}),
		"source": audit.Audit(both, mSrc, audit.Options{IgnoreContent: true}),
	}
	for name, rep := range reps {
		t.Logf("%s:\n%s", name, rep.Summary())
		if !rep.OK() || rep.Total.Lost != 0 || rep.Total.Duplicated != 0 || rep.Unknown != 0 || rep.Target != int(w.Partitions)*(first+after) {
			t.Errorf("the %s cluster: %d lost, %d duplicated, %d unknown, %d records, want every record of both phases once\n%s",
				name, rep.Total.Lost, rep.Total.Duplicated, rep.Unknown, rep.Target, rep)
		}
	}

	// Nothing skipped: every record a group had not read on the target (at or after
	// its target offset) is at or after its offset on the source.
	srcAt, dstAt := offsetsByID(mSrc), offsetsByID(mDst)
	skippedAll, againAll := 0, 0
	for g, offs := range onTarget {
		onSource := w.Committed(false, g)
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
		if !equal(onSource, offs) {
			t.Errorf("group %s on the source: %v, want %v", g, onSource, offs)
		}
	}
	return reps["source"], map[string]any{"target_lost": reps["target"].Total.Lost, "target_duplicated": reps["target"].Total.Duplicated,
		"copied_back": len(p2.Records), "group_skipped": skippedAll, "group_reread": againAll}
}

// offsetsByID maps each record id read to its offset (the last copy's).
func offsetsByID(m *audit.Mirrored) map[string]int64 {
	out := map[string]int64{}
	for _, r := range m.Records {
		out[r.ID] = r.Offset
	}
	return out
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
