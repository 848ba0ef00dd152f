//go:build kafka

package e2ekafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
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
		bg.WaitSent(w.Records * i / (stops + 1))
		s.waitProgress(2000, 2*time.Minute)
		start := time.Now()
		e.StopCleanly(time.Minute)
		drains = append(drains, time.Since(start).Round(10*time.Millisecond).String())
		s.assertCommittedEqualsTarget(fmt.Sprintf("after SIGTERM #%d", i))
		e = s.startEngine(fmt.Sprintf("engine-%d", i), cfg)
	}
	p := bg.Wait(t)
	rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertCommittedEqualsTarget("after the final SIGTERM")
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 3, "sigterms": stops + 1, "drain_times": drains})
}

// assertCommittedEqualsTarget checks that, for every partition, the engine's committed
// source offset equals the target's end offset.
func (s *scenario) assertCommittedEqualsTarget(when string) {
	s.t.Helper()
	e2eharness.AssertCommittedEqualsTarget(s.t, when, committed(s.t, s.src, s.group), endOffsets(s.t, s.dst, s.topics))
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
	bg.WaitSent(w.Records / 5)
	s.waitProgress(2000, 2*time.Minute)
	e2 := s.startEngine("engine-2", cfg)
	e3 := s.startEngine("engine-3", cfg)
	members := s.waitMembers(3, 2*time.Minute)
	s.waitProgress(5000, 2*time.Minute)
	e2.StopCleanly(time.Minute)
	e3.StopCleanly(time.Minute)
	s.waitMembers(1, 2*time.Minute)
	p := bg.Wait(t)
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
	e1.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, col.figures(map[string]any{"max_members": members, "processes": "1->3->1"}))
}

// waitMembers waits until the source consumer group has n members and is Stable.
func (s *scenario) waitMembers(n int, timeout time.Duration) int {
	s.t.Helper()
	return e2eharness.WaitMembers(s.t, s.group, n, timeout, func() (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		groups, err := s.src.Admin().DescribeGroups(ctx, s.group)
		if g, ok := groups[s.group]; err == nil && ok && g.Err == nil {
			return len(g.Members), g.State
		}
		return 0, ""
	})
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
	bg.WaitSent(w.Records / 4)
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
	lines := e.LogLines("Stopped the mirror on a fatal error", "target")
	switch {
	case !exited:
		t.Errorf("the engine still ran %v into a whole-target outage with deliveryTimeout %v", stoppedAfter.Round(time.Second), deliveryTimeout)
		e.Kill()
	case e.ExitCode() == 0:
		t.Errorf("the engine exited with code 0 after failing to deliver; want non-zero")
	}
	if len(lines) == 0 {
		t.Errorf("no fatal error line naming the target; log tail:\n%s", e.LogTail(10))
	} else if at, ok := e2eharness.LogTime(lines[0]); ok && at.Sub(cut) < deliveryTimeout/2 {
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
	p := bg.Wait(t)
	rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, e2eharness.Partitions(s.topics)*maxInFlight+int(float64(w.Rate)*commitInterval.Seconds()))
	s.figures(rep, map[string]any{"brokers": 3, "delivery_timeout": deliveryTimeout.String(),
		"stopped_after": stoppedAfter.Round(100 * time.Millisecond).String(), "exited_by_itself": exited, "reported": len(lines) > 0})
}
