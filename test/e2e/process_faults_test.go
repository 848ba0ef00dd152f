//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// skipFilter is the CEL filter the standard filtered workload is mirrored through.
var skipFilter = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}

const skipFraction = 0.01

// TestKill9 (fault 1): kill -9 the engine three times mid-stream, restarting it each
// time. Each kill lands at a random moment between two commits of an engine in steady
// state. Zero loss; the duplicates are exactly the records the target held beyond the
// commit point at each kill, and each kill's share is at most the records in flight
// plus one commit interval of traffic.
func TestKill9(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) { c.Handlers = skipFilter })
	w := s.stdWorkload(skipFraction)
	// Slower, so that three kills, each followed by a ~10 s wait for the group to expire
	// the dead member's session, still land mid-stream.
	w.Rate = 4000
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	const kills = 3
	type killPoint struct {
		committed map[string]map[int32]int64
		target    *audit.Mirrored
	}
	var points []killPoint
	for i := 1; i <= kills; i++ {
		bg.WaitSent(w.Records * i / (kills + 1))
		// Steady state: the engine (re)joined and has committed everything produced
		// before this point, so the backlog left by the last kill is gone and one commit
		// interval holds the production rate's worth of records, not a catch-up burst
		// (which once put 16,206 records beyond the commit point against a bound of
		// 16,000). Committed source offsets count every produced record, skipped or not.
		s.waitCommitted(max(e2eharness.Sum(s.src.committed(t, s.group))+2000, int64(bg.Progress())), 2*time.Minute)
		time.Sleep(time.Duration(rand.Int63n(int64(commitInterval))))
		e.Kill()
		pt := killPoint{committed: s.src.committed(t, s.group), target: s.readTarget()}
		points = append(points, pt)
		t.Logf("kill -9 #%d with the target holding %d records", i, len(pt.target.Records))
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	_, rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.StopCleanly(time.Minute)

	perKillBound := e2eharness.Partitions(s.topics)*maxInFlight + int(float64(w.Rate)*commitInterval.Seconds())
	var beyond []int
	total := 0
	for i, pt := range points {
		n := deliveredBeyondCommit(p, pt.target, pt.committed)
		beyond = append(beyond, n)
		total += n
		if n > perKillBound {
			t.Errorf("kill #%d: the target held %d records beyond the commit point, want at most %d (in flight + one commit interval)", i+1, n, perKillBound)
		}
	}
	s.assertAudit(rep, total)
	s.figures(rep, map[string]any{"kills": kills, "beyond_commit_at_kills": beyond, "per_kill_bound": perKillBound})
}

// waitCommitted waits until the group's committed offsets sum to at least n.
func (s *scenario) waitCommitted(n int64, timeout time.Duration) {
	s.t.Helper()
	e2eharness.WaitCommitted(s.t, n, timeout, func() map[string]map[int32]int64 { return s.src.committed(s.t, s.group) })
}

// readTarget reads everything the target holds now.
func (s *scenario) readTarget() *audit.Mirrored {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var topics []string
	for topic := range s.topics {
		topics = append(topics, topic)
	}
	m, err := audit.ReadAll(ctx, s.dst.addrs(), topics, audit.ReadOptions{})
	if err != nil {
		s.t.Fatalf("reading the target: %v", err)
	}
	return m
}

// deliveredBeyondCommit counts distinct records on the target whose source offset is at
// or past the committed offset of their partition: what a restart sends again.
func deliveredBeyondCommit(p *audit.Produced, m *audit.Mirrored, committed map[string]map[int32]int64) int {
	byID := make(map[string]audit.ProducedRecord, len(p.Records))
	for _, r := range p.Records {
		byID[r.ID] = r
	}
	seen := map[string]bool{}
	n := 0
	for _, r := range m.Records {
		pr, ok := byID[r.ID]
		if !ok || seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		if pr.Offset >= committed[pr.Topic][pr.Partition] {
			n++
		}
	}
	return n
}

// TestSIGTERM (fault 2): SIGTERM the engine three times mid-stream. Each stop drains and
// commits, so the committed source offset of every partition equals what the target
// holds of it, and the whole run has zero duplicates.
func TestSIGTERM(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(nil) // no filter, so source and target offsets correspond one to one
	w := s.stdWorkload(0)
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	const stops = 3
	var drains []string
	for i := 1; i <= stops; i++ {
		bg.WaitSent(w.Records * i / (stops + 1))
		s.waitProgress(2000, time.Minute)
		took := e.StopCleanly(time.Minute)
		drains = append(drains, took.Round(10*time.Millisecond).String())
		s.assertCommittedEqualsTarget(fmt.Sprintf("after SIGTERM #%d", i))
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	_, rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertCommittedEqualsTarget("after the final SIGTERM")
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"sigterms": stops + 1, "drain_times": drains})
}

// assertCommittedEqualsTarget checks that, for every partition, the engine's committed
// source offset equals the target's end offset.
func (s *scenario) assertCommittedEqualsTarget(when string) {
	s.t.Helper()
	e2eharness.AssertCommittedEqualsTarget(s.t, when, s.src.committed(s.t, s.group), s.dst.endOffsets(s.t, s.topics))
}

// TestScaleOutAndIn (fault 3): one engine process, then three, then one again, all in
// one consumer group, mid-stream. Zero loss and, since every hand-over is a clean
// rebalance (drain, commit, release), zero duplicates: no partition was mirrored by two
// processes at once. TestScaleOutAndInExactlyOnce is its exactly-once column.
func TestScaleOutAndIn(t *testing.T) { scaleOutAndIn(t, atLeastOnce) }

func scaleOutAndIn(t *testing.T, col column) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) {
		c.Streams = 1
		c.Handlers = skipFilter
		col.apply(c)
	})
	w := s.stdWorkload(skipFraction)
	e1 := s.startEngine("engine-1", cfg)
	bg := s.produce(w)

	bg.WaitSent(w.Records / 4)
	s.waitProgress(2000, time.Minute)
	e2 := s.startEngine("engine-2", cfg)
	e3 := s.startEngine("engine-3", cfg)
	members := s.waitMembers(3, time.Minute)
	s.waitProgress(5000, time.Minute)

	bg.WaitSent(w.Records * 3 / 5)
	e2.StopCleanly(time.Minute)
	e3.StopCleanly(time.Minute)
	s.waitMembers(1, time.Minute)

	p := bg.Wait(t)
	rep := s.waitCompleteIn(col, p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	if !e1.Running() {
		t.Errorf("engine-1 exited during the rebalances (code %d)", e1.ExitCode())
	}
	e1.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, col.figures(map[string]any{"max_members": members, "processes": "1->3->1"}))
}

// waitMembers waits until the consumer group has n members in a stable state.
func (s *scenario) waitMembers(n int, timeout time.Duration) int {
	s.t.Helper()
	return e2eharness.WaitMembers(s.t, s.group, n, timeout, func() (int, string) { return s.src.groupMembers(s.t, s.group) })
}

// TestTargetOutage (fault 4): the target is unreachable for a while. Within the delivery
// timeout the engine waits: it keeps running, the commit point freezes during the outage
// and mirroring resumes after it, with nothing lost. Should the engine exit anyway, it
// is restarted as its pod would be, the exit is reported as a failure, and the audit
// still shows what the restart cost.
func TestTargetOutage(t *testing.T) {
	tests := map[string]struct {
		outage time.Duration
	}{
		"5s":  {outage: 5 * time.Second},
		"60s": {outage: 60 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newScenario(t, stdTopics())
			cfg := s.config(func(c *config.Config) { c.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute} })
			w := s.stdWorkload(0)
			sv := s.supervise("engine", cfg)
			bg := s.produce(w)
			bg.WaitSent(w.Records / 3)
			s.waitProgress(2000, time.Minute)

			s.dst.disable()
			// Acks that arrived just before the cut are committed at the next interval;
			// after that the commit point must not move.
			time.Sleep(2 * commitInterval)
			frozen := s.src.committed(t, s.group)
			time.Sleep(tc.outage - 2*commitInterval)
			after := s.src.committed(t, s.group)
			s.dst.enable(t)
			moved := diffOffsets(frozen, after)
			if moved != "" {
				t.Errorf("the commit point moved while the target was unreachable: %s", moved)
			}
			exitsDuring := sv.restarts()
			if len(exitsDuring) > 0 {
				t.Errorf("the engine exited %d times during a %v outage shorter than deliveryTimeout (2m); first: %s", len(exitsDuring), tc.outage, exitsDuring[0])
			}

			p := bg.Wait(t)
			_, rep := s.waitComplete(p, audit.Options{})
			sv.stop(time.Minute)
			s.assertAudit(rep, e2eharness.Partitions(s.topics)*maxInFlight)
			s.figures(rep, map[string]any{"outage": tc.outage.String(), "commit_frozen": moved == "", "engine_exits": len(sv.restarts())})
		})
	}
}

// TestTargetOutageBeyondDeliveryTimeout (fault 4): an outage longer than deliveryTimeout
// stops the engine with a clear error, committing nothing it did not deliver; the
// restarted engine loses nothing.
func TestTargetOutageBeyondDeliveryTimeout(t *testing.T) {
	const deliveryTimeout = 5 * time.Second
	const exitGrace = 30 * time.Second
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) { c.DeliveryTimeout = config.Duration{Duration: deliveryTimeout} })
	w := s.stdWorkload(0)
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	bg.WaitSent(w.Records / 3)
	s.waitProgress(2000, time.Minute)

	s.dst.disable()
	cut := time.Now()
	code, exited := e.WaitExit(deliveryTimeout + exitGrace)
	stoppedAfter := time.Since(cut)
	// The fatal error, not the retried ones a target outage also logs (a topic sync or a
	// progress write that failed and will be tried again).
	line, reported := e.ErrorContains("Stopped the mirror on a fatal error", "target")
	switch {
	case !exited:
		t.Errorf("the engine still ran %v into an outage with deliveryTimeout %v (error logged: %v); killed it",
			stoppedAfter.Round(time.Second), deliveryTimeout, reported)
		e.Kill()
	case code == 0:
		t.Errorf("the engine exited with code 0 after failing to deliver; want non-zero")
	}
	if !reported {
		t.Errorf("no error line naming the target in the engine's output; tail:\n%s", e.LogTail(10))
	}
	if at, ok := e2eharness.LogTime(line); ok && at.Sub(cut) < deliveryTimeout {
		t.Errorf("the engine gave up %v after the cut, before deliveryTimeout %v", at.Sub(cut).Round(100*time.Millisecond), deliveryTimeout)
	}
	t.Logf("the engine stopped %v after the cut (exited by itself: %v, code %d): %s", stoppedAfter.Round(100*time.Millisecond), exited, code, line)
	s.dst.enable(t)

	e = s.startEngine("engine-1", cfg)
	p := bg.Wait(t)
	_, rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, e2eharness.Partitions(s.topics)*maxInFlight+int(float64(stdRate)*commitInterval.Seconds()))
	s.figures(rep, map[string]any{"delivery_timeout": deliveryTimeout.String(), "stopped_after": stoppedAfter.Round(100 * time.Millisecond).String(),
		"exited_by_itself": exited, "exit_code": code})
}

// diffOffsets describes the partitions whose offset differs between a and b.
func diffOffsets(a, b map[string]map[int32]int64) string {
	var out string
	n := 0
	for topic, ps := range b {
		for p, o := range ps {
			if a[topic][p] != o {
				n++
				if n <= 3 {
					out += fmt.Sprintf("%s/%d %d->%d ", topic, p, a[topic][p], o)
				}
			}
		}
	}
	if n > 3 {
		out += fmt.Sprintf("(%d partitions)", n)
	}
	return out
}
