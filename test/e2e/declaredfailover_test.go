//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// runFailoverCommand runs `kafka-mirror failover --config cfgPath args... -o json` and
// returns its report.
func runFailoverCommand(t *testing.T, cfgPath string, args ...string) (*mirror.FailoverReport, error) {
	t.Helper()
	cmd := exec.Command(engineBinary(t), append([]string{"failover", "--config", cfgPath, "-o", "json"}, args...)...)
	out, err := cmd.Output()
	var report mirror.FailoverReport
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("kafka-mirror failover %v printed no JSON report (%v): %s", args, jerr, out)
	}
	return &report, err
}

// sourceIndexes reads partition p of topic on the target and returns the source offsets
// its records carry (produceRange writes "<p>/<i>").
func (s *scenario) sourceIndexes(topic string, p int32) map[int64]int {
	s.t.Helper()
	out := map[int64]int{}
	for i, at := range s.targetCopies(topic, p) {
		out[i] = len(at)
	}
	return out
}

// TestDeclaredFailover runs `kafka-mirror failover` as a process after `kafka-mirror
// run` was stopped: immediate with the source cut off (the report says unknown, and the
// last mirrored offsets leave behind exactly what the target lacks once the source is
// back), then planned (everything mirrored once, 0 left behind, both groups' checkpoints
// exact and committed).
func TestDeclaredFailover(t *testing.T) {
	const (
		topic      = "e2e.declared"
		partitions = 2
	)
	s := newScenario(t, map[string]int32{topic: partitions})
	cfg := s.config(func(c *config.Config) {
		c.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: time.Second}}
	})
	cfgPath := e2eharness.WriteConfig(t, s.dir, "mirror", cfg)
	waitFor := func(timeout time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, timeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for p := int32(0); p < partitions; p++ {
		s.produceRange(topic, p, 0, 100)
	}
	testutil.CommitOffsets(t, s.src.addrs(), "app-a", topic, map[int32]int64{0: 40, 1: 70}, "")
	e := s.startEngine("mirror", cfg)
	waitFor(time.Minute, "the mirror committing 100 on both partitions", func() bool {
		c := committedSoFar(t, s.src, s.group, topic)
		return c[0] == 100 && c[1] == 100
	})
	waitFor(time.Minute, "app-a's checkpoint on the target", func() bool { return len(committedSoFar(t, s.dst, "app-a", topic)) == partitions })
	e.StopCleanly(time.Minute)
	// Written after the mirror stopped: left behind by an immediate failover.
	for p := int32(0); p < partitions; p++ {
		s.produceRange(topic, p, 100, 130+int(p)*10)
	}
	testutil.CommitOffsets(t, s.src.addrs(), "app-b", topic, map[int32]int64{0: 120, 1: 90}, "")

	s.src.disable()
	report, err := runFailoverCommand(t, cfgPath, "--mode", "immediate", "--timeout", "5s")
	s.src.enable(t)
	if err != nil || !report.Completed || report.SourceReachable || len(report.Partitions) != partitions {
		t.Fatalf("immediate failover without the source: %v; report %+v", err, report)
	}
	ends := s.src.endOffsets(t, map[string]int32{topic: partitions})[topic]
	for _, p := range report.Partitions {
		if p.LeftBehind != nil || p.LeftBehindNote != mirror.UnknownSourceUnreachable {
			t.Errorf("partition %d: left behind %v %q, want %q", p.Partition, p.LeftBehind, p.LeftBehindNote, mirror.UnknownSourceUnreachable)
		}
		on := s.sourceIndexes(topic, p.Partition)
		missing := int64(0)
		for i := int64(0); i < ends[p.Partition]; i++ {
			if on[i] == 0 {
				missing++
			}
		}
		if derived := ends[p.Partition] - (p.LastMirroredOffset + 1); derived != missing || missing == 0 {
			t.Errorf("partition %d: the report's last mirrored offset %d leaves %d behind of %d; the target lacks %d",
				p.Partition, p.LastMirroredOffset, derived, ends[p.Partition], missing)
		}
	}
	if len(report.Groups) != 1 || report.Groups[0].Group != "app-a" {
		t.Errorf("groups without the source %+v, want app-a's checkpoint (app-b was never checkpointed)", report.Groups)
	}

	// The source is back: the planned failover mirrors the rest and moves both groups.
	report, err = runFailoverCommand(t, cfgPath, "--mode", "planned", "--timeout", "2m")
	if err != nil || !report.Completed {
		t.Fatalf("planned failover: %v; report %+v", err, report)
	}
	for _, p := range report.Partitions {
		on := s.sourceIndexes(topic, p.Partition)
		for i := int64(0); i < ends[p.Partition]; i++ {
			if on[i] != 1 {
				t.Errorf("partition %d: source record %d has %d copies on the target, want 1", p.Partition, i, on[i])
			}
		}
		if p.LeftBehind == nil || *p.LeftBehind != 0 || p.SourceEnd == nil || *p.SourceEnd != ends[p.Partition] || p.TargetEnd != ends[p.Partition] {
			t.Errorf("partition %d: %+v, want 0 left behind at source end %d", p.Partition, p, ends[p.Partition])
		}
	}
	if len(report.Groups) != 2 {
		t.Fatalf("groups %+v, want app-a and app-b", report.Groups)
	}
	for _, g := range report.Groups {
		for _, gp := range g.Partitions {
			// Every record was copied once at its own offset: the translation is the identity.
			if !gp.Exact || gp.TargetOffset != gp.SourceOffset || (!gp.Committed && gp.Result != "unchanged") {
				t.Errorf("group %s partition %d: %+v, want an exact checkpoint at %d", g.Group, gp.Partition, gp, gp.SourceOffset)
			}
		}
		got := committedSoFar(t, s.dst, g.Group, topic)
		for _, gp := range g.Partitions {
			if got[gp.Partition] != gp.TargetOffset {
				t.Errorf("group %s partition %d: the target group holds %d, the report says %d", g.Group, gp.Partition, got[gp.Partition], gp.TargetOffset)
			}
		}
	}
}
