//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestSourceResetsAndTargetLatency (fault 5): the source connection is reset mid-fetch
// (every broker response is answered by a TCP RST) in three one-second windows, while
// every target response is 100 ms late for the whole run. Zero loss.
// TestSourceResetsAndTargetLatencyExactlyOnce is its exactly-once column.
func TestSourceResetsAndTargetLatency(t *testing.T) { sourceResetsAndTargetLatency(t, atLeastOnce) }

func sourceResetsAndTargetLatency(t *testing.T, col column) {
	s := newScenario(t, stdTopics())
	cfg := s.config(col.apply)
	w := s.stdWorkload(0)
	removeLatency := s.dst.addToxic(t, "latency", "latency", "downstream", `{"latency":100}`)
	defer removeLatency()
	sv := s.supervise("engine", cfg)
	bg := s.produce(w)
	const windows = 3
	for i := 1; i <= windows; i++ {
		bg.WaitSent(w.Records * i / (windows + 1))
		s.waitProgress(1000, time.Minute)
		remove := s.src.addToxic(t, "reset", "reset_peer", "downstream", `{"timeout":0}`)
		time.Sleep(time.Second)
		remove()
	}
	p := bg.Wait(t)
	rep := s.waitCompleteIn(col, p, audit.Options{})
	sv.stop(time.Minute)
	exits := sv.restarts()
	if len(exits) > 0 {
		t.Errorf("the engine exited %d times on transient network errors; first: %s", len(exits), exits[0])
	}
	s.assertAudit(rep, col.maxDuplicates(windows*e2eharness.Partitions(s.topics)*maxInFlight))
	s.figures(rep, col.figures(map[string]any{"source_reset_windows": windows, "engine_exits": len(exits), "target_latency": "100ms"}))
}

// TestAcksLost (fault 6): produce requests reach the target and are written, but every
// response is answered by a TCP RST, in two three-second windows: the engine never sees
// those acks and must retry. Duplicates are allowed, loss is not.
// TestAcksLostExactlyOnce is its exactly-once column, where duplicates are not allowed.
func TestAcksLost(t *testing.T) { acksLost(t, atLeastOnce) }

func acksLost(t *testing.T, col column) {
	s := newScenario(t, stdTopics())
	cfg := s.config(col.apply)
	w := s.stdWorkload(0)
	sv := s.supervise("engine", cfg)
	bg := s.produce(w)
	const windows = 2
	for i := 1; i <= windows; i++ {
		bg.WaitSent(w.Records * i / (windows + 1))
		s.waitProgress(1000, time.Minute)
		remove := s.dst.addToxic(t, "cut-acks", "reset_peer", "downstream", `{"timeout":0}`)
		time.Sleep(3 * time.Second)
		remove()
	}
	p := bg.Wait(t)
	rep := s.waitCompleteIn(col, p, audit.Options{})
	sv.stop(time.Minute)
	exits := sv.restarts()
	if len(exits) > 0 {
		t.Errorf("the engine exited %d times on lost acks, before deliveryTimeout; first: %s", len(exits), exits[0])
	}
	s.assertAudit(rep, col.maxDuplicates(windows*e2eharness.Partitions(s.topics)*maxInFlight))
	s.figures(rep, col.figures(map[string]any{"ack_cut_windows": windows, "engine_exits": len(exits)}))
}

// TestPartitionExpansionAndNewTopic (fault 7): mid-stream a source topic grows from 4 to
// 8 partitions and a new matching topic appears. The engine (syncTopics on, as when run
// without the operator) creates and expands the target topics and mirrors both from
// their first offset. TestPartitionExpansionAndNewTopicExactlyOnce is its exactly-once
// column.
func TestPartitionExpansionAndNewTopic(t *testing.T) { partitionExpansionAndNewTopic(t, atLeastOnce) }

func partitionExpansionAndNewTopic(t *testing.T, col column) {
	s := &scenario{
		t:      t,
		src:    newCluster(t, "source", 1),
		dst:    newCluster(t, "target", 1),
		dir:    t.TempDir(),
		topics: map[string]int32{"e2e.orders": 4, "e2e.payments": 8},
		group:  "kafka-mirror.e2e.expansion",
		start:  time.Now(),
	}
	engineBinary(t)
	s.keepLogs()
	s.src.createTopics(t, s.topics, nil)
	cfg := s.config(func(c *config.Config) {
		c.SyncTopics = config.BoolPtr(true)
		c.TopicSyncInterval = config.Duration{Duration: 2 * time.Second}
		col.apply(c)
	})
	e := s.startEngine("engine", cfg)

	first := audit.Workload{Topics: s.topics, Records: 100_000, Rate: stdRate, NullFraction: stdNullFraction, Seed: 1, Run: "before"}
	bg := s.produce(first)
	bg.WaitSent(first.Records / 2)
	s.src.addPartitions(t, "e2e.orders", 8)
	s.src.createTopics(t, map[string]int32{"e2e.new": 4}, nil)
	p := bg.Wait(t)

	grown := map[string]int32{"e2e.orders": 8, "e2e.payments": 8, "e2e.new": 4}
	second := audit.Workload{Topics: grown, Records: 100_000, Rate: stdRate, NullFraction: stdNullFraction, Seed: 2, Run: "after"}
	bg = s.produce(second)
	p.Merge(bg.Wait(t))
	s.topics = grown

	rep := s.waitCompleteIn(col, p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	newParts := 0
	for _, pr := range rep.Partitions {
		if (pr.Topic == "e2e.orders" && pr.Partition >= 4) || pr.Topic == "e2e.new" {
			newParts++
			if pr.Mirrored != pr.Produced {
				t.Errorf("new partition %s/%d: %d of %d mirrored", pr.Topic, pr.Partition, pr.Mirrored, pr.Produced)
			}
		}
	}
	if newParts != 8 {
		t.Errorf("the audit covered %d new partitions, want 8 (4 added to e2e.orders, 4 of e2e.new)", newParts)
	}
	ends := s.dst.endOffsets(t, grown)
	if len(ends["e2e.orders"]) != 8 || len(ends["e2e.new"]) != 4 {
		t.Errorf("target partitions: e2e.orders %d, e2e.new %d; want 8 and 4", len(ends["e2e.orders"]), len(ends["e2e.new"]))
	}
	s.figures(rep, col.figures(map[string]any{"new_partitions": newParts}))
}

// TestTransactionalSource (fault 8): the source is written in transactions of 100
// records, 30% of them aborted. Only committed records reach the target, the offset
// gaps left by transaction markers and aborted records do not stall any partition, and
// the commit point passes every committed record. TestTransactionalSourceExactlyOnce is
// its exactly-once column.
func TestTransactionalSource(t *testing.T) { transactionalSource(t, atLeastOnce) }

func transactionalSource(t *testing.T, col column) {
	s := newScenario(t, stdTopics())
	cfg := s.config(col.apply)
	w := s.stdWorkload(0)
	w.TransactionSize = 100
	w.AbortFraction = 0.3
	e := s.startEngine("engine", cfg)
	p := s.produce(w).Wait(t)
	rep := s.waitCompleteIn(col, p, audit.Options{})
	if rep.Aborted != 0 {
		t.Errorf("%d records of aborted transactions reached the target", rep.Aborted)
	}
	// Commit point: past the last committed record of every partition.
	last := map[string]map[int32]int64{}
	for _, r := range p.Records {
		if last[r.Topic] == nil {
			last[r.Topic] = map[int32]int64{}
		}
		last[r.Topic][r.Partition] = max(last[r.Topic][r.Partition], r.Offset)
	}
	var stuck []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		stuck = stuck[:0]
		committed := s.src.committed(t, s.group)
		for topic, ps := range last {
			for part, off := range ps {
				if committed[topic][part] <= off {
					stuck = append(stuck, fmt.Sprintf("%s/%d committed %d, last record %d", topic, part, committed[topic][part], off))
				}
			}
		}
		if len(stuck) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(stuck) > 0 {
		t.Errorf("the commit point is stuck before committed records in %d partitions: %v", len(stuck), stuck[:min(3, len(stuck))])
	}
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, col.figures(map[string]any{"aborted_produced": len(p.Aborted), "aborted_on_target": rep.Aborted, "stuck_partitions": len(stuck)}))
}

// TestSlowTarget (fault 11): the target takes 256 KiB/s for 15 seconds while the
// source is written as fast as it goes. The engine's memory stays bounded by its
// in-flight limit (peak RSS reported) and nothing is lost. TestSlowTargetExactlyOnce is
// its exactly-once column (maxInFlightPerPartition bounds a transaction's records there).
func TestSlowTarget(t *testing.T) { slowTarget(t, atLeastOnce) }

func slowTarget(t *testing.T, col column) {
	const peakLimitMiB = 256
	s := newScenario(t, stdTopics())
	cfg := s.config(col.apply)
	w := s.stdWorkload(0)
	w.Rate = 0
	e := s.startEngine("engine", cfg)
	s.waitMembers(cfg.Streams, time.Minute)
	remove := s.dst.addToxic(t, "slow", "bandwidth", "upstream", `{"rate":256}`)
	p := s.produce(w).Wait(t)
	time.Sleep(15*time.Second - p.Elapsed)
	mid := e.PeakRSS() / 1024 // kB
	remove()
	rep := s.waitCompleteIn(col, p, audit.Options{})
	peak := e.PeakRSS() / 1024 // kB
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	if peak == 0 {
		t.Error("the engine's peak RSS could not be read from /proc")
	}
	switch {
	case col.exactlyOnce:
		// Not asserted yet: exactly-once keeps a producer, client and batch buffer per
		// source partition (24 here), and its peak measured 220 to 273 MiB in five
		// runs; its bound is still to be worked out (docs/exactly-once.md, Limits).
		t.Logf("exactly-once peak RSS %d MiB (at-least-once's ceiling: %d MiB, not applied)", peak/1024, peakLimitMiB)
	case peak/1024 > peakLimitMiB:
		t.Errorf("the engine's peak RSS was %d MiB, want at most %d MiB with maxInFlightPerPartition=%d", peak/1024, peakLimitMiB, maxInFlight)
	}
	s.figures(rep, col.figures(map[string]any{"peak_rss_mib": peak / 1024, "peak_rss_mib_while_slow": mid / 1024, "target_bandwidth": "256KiB/s"}))
}
