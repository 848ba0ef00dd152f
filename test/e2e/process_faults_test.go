//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// skipFilter is the CEL filter the standard filtered workload is mirrored through.
var skipFilter = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}

const skipFraction = 0.01

// partitions counts the partitions of a topic map.
func partitions(topics map[string]int32) int {
	n := 0
	for _, p := range topics {
		n += int(p)
	}
	return n
}

// waitProgress waits until the target holds at least `more` records beyond what it held
// when called, so a fault lands while the engine is mirroring, not while it starts.
func (s *scenario) waitProgress(more int64, timeout time.Duration) {
	s.t.Helper()
	base := s.targetCount()
	if !s.waitTarget(base+more, timeout) {
		s.t.Fatalf("the target did not grow by %d records within %v (it holds %d)", more, timeout, s.targetCount())
	}
}

// TestKill9 (fault 1): kill -9 the engine three times mid-stream, restarting it each
// time. Zero loss; duplicates at most, per kill, the records in flight plus one commit
// interval of traffic.
func TestKill9(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) { c.Handlers = skipFilter })
	w := s.stdWorkload(skipFraction)
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	const kills = 3
	for i := 1; i <= kills; i++ {
		bg.waitSent(w.Records * i / (kills + 1))
		s.waitProgress(2000, time.Minute)
		e.kill()
		t.Logf("kill -9 #%d with the target holding %d records", i, s.targetCount())
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.wait(t)
	_, rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.stop(time.Minute)

	bound := kills * (partitions(s.topics)*maxInFlight + int(float64(stdRate)*commitInterval.Seconds()))
	s.assertAudit(rep, bound)
	s.figures(rep, map[string]any{"kills": kills, "duplicate_bound": bound})
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
		bg.waitSent(w.Records * i / (stops + 1))
		s.waitProgress(2000, time.Minute)
		took := e.stop(time.Minute)
		drains = append(drains, took.Round(10*time.Millisecond).String())
		s.assertCommittedEqualsTarget(fmt.Sprintf("after SIGTERM #%d", i))
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.wait(t)
	_, rep := s.waitComplete(p, audit.Options{})
	e.stop(time.Minute)
	s.assertCommittedEqualsTarget("after the final SIGTERM")
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"sigterms": stops + 1, "drain_times": drains})
}

// assertCommittedEqualsTarget checks that, for every partition, the engine's committed
// source offset equals the target's end offset (preserve partitioning, no filter, empty
// target at the start: the n-th source record is the n-th target record).
func (s *scenario) assertCommittedEqualsTarget(when string) {
	s.t.Helper()
	committed := s.src.committed(s.t, s.group)
	ends := s.dst.endOffsets(s.t, s.topics)
	bad := 0
	for topic, ps := range ends {
		for p, end := range ps {
			c, ok := committed[topic][p]
			if !ok && end == 0 {
				continue
			}
			if c != end {
				bad++
				if bad <= 5 {
					s.t.Errorf("%s: %s/%d committed %d (present %v), target holds %d", when, topic, p, c, ok, end)
				}
			}
		}
	}
	if bad > 5 {
		s.t.Errorf("%s: %d partitions in all with committed offset != target end offset", when, bad)
	}
}

// TestScaleOutAndIn (fault 3): one engine process, then three, then one again, all in
// one consumer group, mid-stream. Zero loss and, since every hand-over is a clean
// rebalance (drain, commit, release), zero duplicates: no partition was mirrored by two
// processes at once.
func TestScaleOutAndIn(t *testing.T) {
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) {
		c.Streams = 1
		c.Handlers = skipFilter
	})
	w := s.stdWorkload(skipFraction)
	e1 := s.startEngine("engine-1", cfg)
	bg := s.produce(w)

	bg.waitSent(w.Records / 4)
	s.waitProgress(2000, time.Minute)
	e2 := s.startEngine("engine-2", cfg)
	e3 := s.startEngine("engine-3", cfg)
	members := s.waitMembers(3, time.Minute)
	s.waitProgress(5000, time.Minute)

	bg.waitSent(w.Records * 3 / 5)
	e2.stop(time.Minute)
	e3.stop(time.Minute)
	s.waitMembers(1, time.Minute)

	p := bg.wait(t)
	_, rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	if !e1.running() {
		t.Errorf("engine-1 exited during the rebalances (code %d)", e1.exitCode())
	}
	e1.stop(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"max_members": members, "processes": "1->3->1"})
}

// waitMembers waits until the consumer group has n members in a stable state.
func (s *scenario) waitMembers(n int, timeout time.Duration) int {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var got int
	var state string
	for time.Now().Before(deadline) {
		got, state = s.src.groupMembers(s.t, s.group)
		if got == n && state == "Stable" {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("group %s has %d members (%s), want %d stable within %v", s.group, got, state, n, timeout)
	return got
}

// TestTargetOutage (fault 4): the target is unreachable for a while. Within the delivery
// timeout the engine waits: the commit point freezes during the outage and mirroring
// resumes after it, with nothing lost.
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
			e := s.startEngine("engine", cfg)
			bg := s.produce(w)
			bg.waitSent(w.Records / 3)
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
			if !e.running() {
				t.Fatalf("the engine exited during a %v outage shorter than deliveryTimeout (code %d)", tc.outage, e.exitCode())
			}

			p := bg.wait(t)
			_, rep := s.waitComplete(p, audit.Options{})
			e.stop(time.Minute)
			s.assertAudit(rep, partitions(s.topics)*maxInFlight)
			s.figures(rep, map[string]any{"outage": tc.outage.String(), "commit_frozen": moved == ""})
		})
	}
}

// TestTargetOutageBeyondDeliveryTimeout (fault 4): an outage longer than deliveryTimeout
// stops the engine with a clear error, committing nothing it did not deliver; the
// restarted engine loses nothing.
func TestTargetOutageBeyondDeliveryTimeout(t *testing.T) {
	const deliveryTimeout = 5 * time.Second
	s := newScenario(t, stdTopics())
	cfg := s.config(func(c *config.Config) { c.DeliveryTimeout = config.Duration{Duration: deliveryTimeout} })
	w := s.stdWorkload(0)
	e := s.startEngine("engine-0", cfg)
	bg := s.produce(w)
	bg.waitSent(w.Records / 3)
	s.waitProgress(2000, time.Minute)

	s.dst.disable()
	cut := time.Now()
	code, exited := e.waitExit(deliveryTimeout + 40*time.Second)
	stoppedAfter := time.Since(cut)
	if !exited {
		s.dst.enable(t)
		t.Fatalf("the engine still runs %v into an outage with deliveryTimeout %v", stoppedAfter.Round(time.Second), deliveryTimeout)
	}
	if code == 0 {
		t.Errorf("the engine exited with code 0 after failing to deliver; want non-zero")
	}
	line, ok := e.logContains("error", "target")
	if !ok {
		t.Errorf("no error line naming the target in the engine's output; tail:\n%s", e.logTail(10))
	}
	t.Logf("the engine stopped %v after the cut with code %d: %s", stoppedAfter.Round(100*time.Millisecond), code, line)
	s.dst.enable(t)

	e = s.startEngine("engine-1", cfg)
	p := bg.wait(t)
	_, rep := s.waitComplete(p, audit.Options{})
	e.stop(time.Minute)
	s.assertAudit(rep, partitions(s.topics)*maxInFlight+int(float64(stdRate)*commitInterval.Seconds()))
	s.figures(rep, map[string]any{"delivery_timeout": deliveryTimeout.String(), "stopped_after": stoppedAfter.Round(100 * time.Millisecond).String(), "exit_code": code})
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
