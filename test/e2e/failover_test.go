//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// produceRange writes records from..to-1 of partition p to topic, each with the value
// "<p>/<i>", i being its source offset (the topic holds nothing else).
func (s *scenario) produceRange(topic string, p int32, from, to int) {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.src.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d/%d", p, i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.t.Fatalf("producing %s/%d %d..%d: %v", topic, p, from, to-1, err)
	}
}

// targetCopies reads partition p of topic on the target up to its end and returns, per
// source offset, the target offsets of its copies.
func (s *scenario) targetCopies(topic string, p int32) map[int64][]int64 {
	s.t.Helper()
	end := s.dst.endOffsets(s.t, map[string]int32{topic: p + 1})[topic][p]
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.dst.addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	out := map[int64][]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for next := int64(0); next < end; {
		if time.Now().After(deadline) {
			s.t.Fatalf("read %s/%d on the target up to %d of %d in 30s", topic, p, next, end)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			_, idx, ok := strings.Cut(string(r.Value), "/")
			i, err := strconv.ParseInt(idx, 10, 64)
			if !ok || err != nil {
				s.t.Fatalf("target record %s/%d@%d has value %q, not <partition>/<offset>", topic, p, r.Offset, r.Value)
			}
			out[i] = append(out[i], r.Offset)
		})
	}
	return out
}

// committedSoFar returns the offsets group committed for topic on c: none while the
// group does not exist yet.
func committedSoFar(t *testing.T, c *cluster, group, topic string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[int32]int64{}
	resp, err := req.RequestWith(ctx, c.admin(t))
	if err != nil || resp.ErrorCode != 0 {
		return out
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.ErrorCode == 0 && rp.Offset >= 0 {
				out[rp.Partition] = rp.Offset
			}
		}
	}
	return out
}

// assignedPartitions returns the partitions of topic an engine reports a committed
// offset gauge for, with that offset (its /metrics at address).
func assignedPartitions(t *testing.T, address, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := engineproc.Scrape(ctx, nil, address)
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	for _, s := range m["kafka_mirror_committed_offset"].GetMetric() {
		var tp string
		var p int64 = -1
		for _, l := range s.GetLabel() {
			switch l.GetName() {
			case "topic":
				tp = l.GetValue()
			case "partition":
				p, _ = strconv.ParseInt(l.GetValue(), 10, 32)
			}
		}
		if tp == topic && p >= 0 {
			out[int32(p)] = int64(s.GetGauge().GetValue())
		}
	}
	return out
}

// TestFailoverAfterASlowDrain (issue 30 item 2, as processes): engine a mirrors 100
// records per partition; its produce requests are then held on the target, so its
// records 100..149 stay in flight. Engine b joins: a's drain gives up and commits 100;
// b takes one partition and mirrors its records 100..199; a's requests are let
// through, its 100..149 land after them, and b mirrors 200..249. A consumer group at
// 120 of that partition is translated (by the engines' checkpoints and by `kafka-mirror
// offsets translate --commit`): a consumer moved to the target from the translated
// offset must read every record at or after 120. Before the fix it started at a's late
// copy of 120 and skipped 150..199, whose only copies are b's.
func TestFailoverAfterASlowDrain(t *testing.T) {
	const (
		topic = "e2e.slowdrain"
		group = "app"
	)
	s := newScenario(t, map[string]int32{topic: 2})
	cfg := s.config(func(c *config.Config) {
		c.Streams = 1
		// a's records wait on the target longer than its drain (the rebalance timeout,
		// 60 s, less a margin): the delivery watch must not stop it meanwhile.
		c.DeliveryTimeout = config.Duration{Duration: 3 * time.Minute}
		c.Groups = &config.Groups{Include: []string{group}, SyncInterval: config.Duration{Duration: time.Second}}
	})
	hold := testutil.HoldProducers(s.dst.kf, topic)
	released := false
	defer func() {
		if !released {
			hold.Release()
		}
	}()
	start := func(name string) (*engine, string, string) {
		c := cfg
		c.Metrics.Address = e2eharness.FreeAddr(t)
		path := e2eharness.WriteConfig(t, s.dir, name, c)
		return e2eharness.StartEngine(t, name, path), c.Metrics.Address, path
	}
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
	committed := func() map[int32]int64 { return committedSoFar(t, s.src, s.group, topic) }

	for p := int32(0); p < 2; p++ {
		s.produceRange(topic, p, 0, 100)
	}
	a, aMetrics, aConfig := start("a")
	waitFor(time.Minute, "a committing 100 on both partitions", func() bool { c := committed(); return c[0] == 100 && c[1] == 100 })
	hold.Hold(hold.Seen()...)
	for p := int32(0); p < 2; p++ {
		s.produceRange(topic, p, 100, 150)
	}
	waitFor(time.Minute, "a's records 100..149 of both partitions in flight, held on the target", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := engineproc.Scrape(ctx, nil, aMetrics)
		return err == nil && m.Sum("kafka_mirror_inflight_records") == 100 && hold.Holding() > 0
	})

	b, bMetrics, _ := start("b")
	var moved int32 = -1
	// a's drain gives up after the rebalance timeout less a margin (about 50 s).
	waitFor(3*time.Minute, "b owning one partition", func() bool {
		for p := range assignedPartitions(t, bMetrics, topic) {
			moved = p
			return true
		}
		return false
	})
	s.produceRange(topic, moved, 150, 200)
	waitFor(time.Minute, "b mirroring 100..199", func() bool { return committed()[moved] == 200 })
	hold.Release()
	released = true
	waitFor(time.Minute, "a's late records on the target", func() bool {
		return s.dst.endOffsets(t, map[string]int32{topic: 2})[topic][moved] == 250
	})
	s.produceRange(topic, moved, 200, 250)
	waitFor(time.Minute, "b mirroring 200..249", func() bool { return committed()[moved] == 250 })

	// a's drain gave up and committed 100: b copied 100..199 first, a's 100..149 came
	// after them.
	copies := s.targetCopies(topic, moved)
	for i := int64(100); i < 150; i++ {
		if len(copies[i]) != 2 || copies[i][1] < copies[199][0] {
			t.Fatalf("source record %d has copies at %v (199 at %v): want b's, then a's late one after b's 150..199", i, copies[i], copies[199])
		}
	}

	// The application's group stopped at 120 on the source; every writer's syncs are
	// written (a's end with its late records, b's within a second).
	testutil.CommitOffsets(t, s.src.addrs(), group, topic, map[int32]int64{moved: 120}, "")
	time.Sleep(3 * cfg.Groups.SyncInterval.Duration)
	out, err := exec.Command(engineBinary(t), "offsets", "translate", "--config", aConfig, "--group", group, "--commit").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-mirror offsets translate --commit: %v\n%s", err, out)
	}
	t.Logf("kafka-mirror offsets translate --commit:\n%s", out)
	var translated int64 = -1
	waitFor(time.Minute, "the target group's offset of the moved partition", func() bool {
		c, ok := committedSoFar(t, s.dst, group, topic)[moved]
		translated = c
		return ok
	})

	var skipped []int64
	for i, at := range copies {
		readable := false
		for _, o := range at {
			readable = readable || o >= translated
		}
		if i >= 120 && !readable {
			skipped = append(skipped, i)
		}
	}
	t.Logf("source offset 120 of partition %d: the target group starts at %d; copies of 120 at %v, of 150 at %v; %d records skipped",
		moved, translated, copies[120], copies[150], len(skipped))
	if len(skipped) != 0 {
		t.Fatalf("a consumer failed over from target offset %d skips %d records at or after 120 that are on the target", translated, len(skipped))
	}
	a.StopCleanly(2 * time.Minute)
	b.StopCleanly(2 * time.Minute)
}
