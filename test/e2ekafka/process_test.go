//go:build kafka

package e2ekafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Engine process faults on 3-broker clusters.

// TestSIGTERM: SIGTERM the engine three times mid-stream, restarting it each time.
// Each stop drains and commits: after every stop the committed source offset of every
// partition equals the target's end offset, and the run has zero duplicates.
func TestSIGTERM(t *testing.T) {
	s := newScenario(t, world{brokers: 3}, replicatedTopics())
	cfg := s.config(nil) // no filter: source and target offsets correspond one to one
	w := s.workload(brokerRecords, brokerRecordsRate, 0)
	e := s.startJoined("engine-0", cfg)
	bg := s.produce(w)
	const stops = 3
	var drains []string
	for i := 1; i <= stops; i++ {
		bg.waitSent(w.Records * i / (stops + 1))
		s.waitProgress(2000, 2*time.Minute)
		start := time.Now()
		e.stop(time.Minute)
		drains = append(drains, time.Since(start).Round(10*time.Millisecond).String())
		s.assertCommittedEqualsTarget(fmt.Sprintf("after SIGTERM #%d", i))
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.wait(t)
	rep := s.waitComplete(p, audit.Options{})
	e.stop(time.Minute)
	s.assertCommittedEqualsTarget("after the final SIGTERM")
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 3, "sigterms": stops + 1, "drain_times": drains})
}

// assertCommittedEqualsTarget checks that, for every partition, the engine's committed
// source offset equals the target's end offset (preserve partitioning, no filter, an
// empty target at the start: the n-th source record is the n-th target record).
func (s *scenario) assertCommittedEqualsTarget(when string) {
	s.t.Helper()
	committed := committed(s.t, s.src, s.group)
	bad := 0
	for topic, ps := range endOffsets(s.t, s.dst, s.topics) {
		for p, end := range ps {
			c, ok := committed[topic][p]
			if (!ok && end == 0) || c == end {
				continue
			}
			if bad++; bad <= 5 {
				s.t.Errorf("%s: %s/%d committed %d (present %v), the target holds %d", when, topic, p, c, ok, end)
			}
		}
	}
	if bad > 5 {
		s.t.Errorf("%s: %d partitions in all with a committed offset other than the target's end offset", when, bad)
	}
}

// TestScaleOutAndIn: one engine process, then three in the same group, then one again
// (the others stopped with SIGTERM), mid-stream. Every hand-over is a clean rebalance
// (drain, commit, release): zero loss and zero duplicates.
func TestScaleOutAndIn(t *testing.T) { scaleOutAndIn(t, column{}) }

// TestScaleOutAndInExactlyOnce is TestScaleOutAndIn with delivery exactlyOnce: every
// hand-over fences the partition's transactional id at the real transaction
// coordinator. Read_committed, zero duplicates.
func TestScaleOutAndInExactlyOnce(t *testing.T) { scaleOutAndIn(t, column{exactlyOnce: true}) }

func scaleOutAndIn(t *testing.T, col column) {
	s := newScenario(t, world{brokers: 3}, replicatedTopics())
	cfg := s.config(func(c *config.Config) {
		c.Streams = 1
		c.Handlers = skipFilter
		col.apply(c)
	})
	w := s.workload(brokerRecords, brokerRecordsRate, skipFraction)
	e1 := s.startJoined("engine-1", cfg)
	bg := s.produce(w)
	bg.waitSent(w.Records / 5)
	s.waitProgress(2000, 2*time.Minute)
	e2 := s.startEngine("engine-2", cfg)
	e3 := s.startEngine("engine-3", cfg)
	members := s.waitMembers(3, 2*time.Minute)
	s.waitProgress(5000, 2*time.Minute)
	e2.stop(time.Minute)
	e3.stop(time.Minute)
	s.waitMembers(1, 2*time.Minute)
	p := bg.wait(t)
	opts := audit.Options{Filtered: audit.SkipHeaderFiltered}
	var rep audit.Report
	if col.exactlyOnce {
		rep = s.waitCompleteCommitted(p, opts)
	} else {
		rep = s.waitComplete(p, opts)
	}
	if !e1.Running() {
		t.Errorf("engine-1 exited during the rebalances (code %d)", e1.ExitCode())
	}
	e1.stop(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, col.figures(map[string]any{"max_members": members, "processes": "1->3->1"}))
}

// waitMembers waits until the source consumer group has n members and is Stable.
func (s *scenario) waitMembers(n int, timeout time.Duration) int {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var got int
	var state string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		groups, err := s.src.Admin().DescribeGroups(ctx, s.group)
		cancel()
		if err == nil {
			if g, ok := groups[s.group]; ok && g.Err == nil {
				got, state = len(g.Members), g.State
				if got == n && state == "Stable" {
					return got
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("the group had %d members (%s) after %v, want %d Stable", got, state, timeout, n)
	return got
}

// TestTargetDownBeyondDeliveryTimeout: every target broker killed -9 for longer than
// deliveryTimeout (10 s) while records flow. The engine must log an error naming the
// target not long before deliveryTimeout after the cut and exit non-zero (a pod restart
// loop with a message); restarted once the target is back, it loses nothing.
func TestTargetDownBeyondDeliveryTimeout(t *testing.T) {
	const deliveryTimeout = 10 * time.Second
	const exitGrace = 45 * time.Second
	s := newScenario(t, world{brokers: 3}, replicatedTopics())
	cfg := s.config(func(c *config.Config) { c.DeliveryTimeout = config.Duration{Duration: deliveryTimeout} })
	w := s.workload(brokerRecords, brokerRecordsRate, 0)
	e := s.startJoined("engine-0", cfg)
	bg := s.produce(w)
	bg.waitSent(w.Records / 4)
	s.waitProgress(2000, 2*time.Minute)
	for _, id := range s.dst.IDs() {
		if err := s.dst.Kill(id); err != nil {
			t.Fatal(err)
		}
	}
	cut := time.Now()
	var exited bool
	select {
	case <-e.Done():
		exited = true
	case <-time.After(deliveryTimeout + exitGrace):
	}
	stoppedAfter := time.Since(cut)
	lines := e.logLines("Stopped the mirror on a fatal error", "target")
	switch {
	case !exited:
		t.Errorf("the engine still ran %v into a whole-target outage with deliveryTimeout %v", stoppedAfter.Round(time.Second), deliveryTimeout)
		e.Kill()
	case e.ExitCode() == 0:
		t.Errorf("the engine exited with code 0 after failing to deliver; want non-zero")
	}
	if len(lines) == 0 {
		t.Errorf("no fatal error line naming the target; log tail:\n%s", e.LogTail(10))
	} else if at, ok := logTime(lines[0]); ok && at.Sub(cut) < deliveryTimeout/2 {
		// deliveryTimeout counts from when each record was read, which can be a moment
		// before the cut (9.6 s after it was seen once): only an engine that gave up
		// well before deliveryTimeout is wrong.
		t.Errorf("the engine gave up %v after the cut, long before deliveryTimeout %v", at.Sub(cut).Round(100*time.Millisecond), deliveryTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.dst.RestartAll(ctx); err != nil {
		t.Fatal(err)
	}
	e = s.startEngine("engine-1", cfg)
	p := bg.wait(t)
	rep := s.waitComplete(p, audit.Options{})
	e.stop(time.Minute)
	s.assertAudit(rep, partitions(s.topics)*maxInFlight+int(float64(w.Rate)*commitInterval.Seconds()))
	s.figures(rep, map[string]any{"brokers": 3, "delivery_timeout": deliveryTimeout.String(),
		"stopped_after": stoppedAfter.Round(100 * time.Millisecond).String(), "exited_by_itself": exited, "reported": len(lines) > 0})
}
