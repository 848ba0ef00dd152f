//go:build kafka

package e2ekafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumerGroupMovedToTarget: offset translation with a real application consumer.
// A franz-go group consumer (group app.x) reads part of 7 of the 8 source partitions
// and commits; the mirror (skip filter on, so source and target offsets differ) checkpoints
// the group; then the application moves: a consumer of the same group on the target
// starts from the translated offsets and reads to the end. What it read on the source
// before and on the target after covers every mirrored record: 0 skipped. A record read
// on both sides is a duplicate: the group is idle and the mirror caught up, so the
// translation must be exact (waited for, partition by partition) and the duplicates 0.
func TestConsumerGroupMovedToTarget(t *testing.T) {
	s := newScenario(t, world{}, smokeTopics())
	const app = appGroupPrefix + "x"
	cfg := s.config(func(c *config.Config) {
		c.Handlers = skipFilter
		c.Groups = &config.Groups{Include: []string{`app\..*`}, SyncInterval: config.Duration{Duration: time.Second}}
	})
	e := s.startJoined("engine", cfg)
	p := s.produce(s.workload(20_000, 0, 0.05)).Wait(t)

	// The application reads part of every partition on the source (from 0 to 70 %, e2e.orders/0
	// partition not at all), commits what it read, leaves.
	cut := map[string]map[int32]int64{}
	toRead := 0
	for topic, n := range s.topics {
		cut[topic] = map[int32]int64{}
		for part := range n {
			ends := int64(0)
			for _, r := range p.Records {
				if r.Topic == topic && r.Partition == part {
					ends = max(ends, r.Offset+1)
				}
			}
			pct := 15 * int64(part) // e2e.orders/0 not at all
			if topic != "e2e.orders" {
				pct += 25
			}
			cut[topic][part] = ends * pct / 100
			for _, r := range p.Records {
				if r.Topic == topic && r.Partition == part && r.Offset < cut[topic][part] {
					toRead++
				}
			}
		}
	}
	t.Logf("the application reads on the source up to %v (%d records)", cut, toRead)
	before := consumeAsGroup(t, s.src, app, s.topics,
		func(r *kgo.Record) bool { return r.Offset < cut[r.Topic][r.Partition] },
		func(n int, _ map[string]map[int32]int64) bool { return n >= toRead })
	srcCommitted := committed(t, s.src, app)
	rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	s.assertAudit(rep, 0)

	// The exact translation: the target offset of the first mirrored record at or
	// after the source position (the target topics started empty, the audit saw no
	// duplicates, so it is the count of mirrored records before it).
	want := kadm.Offsets{}
	for topic, parts := range srcCommitted {
		for part, at := range parts {
			n := int64(0)
			for _, r := range p.Records {
				if r.Topic == topic && r.Partition == part && r.Offset < at && !r.Skip {
					n++
				}
			}
			want.Add(kadm.Offset{Topic: topic, Partition: part, At: n, LeaderEpoch: -1})
		}
	}
	if len(srcCommitted) == 0 {
		t.Fatal("the application committed nothing on the source")
	}
	got := s.waitGroupOffsets(app, want, 2*time.Minute)
	t.Logf("the group committed %d partitions on the source; translated on the target: %v", len(got), got)

	// The application moves to the target and reads to the end.
	ends := endOffsets(t, s.dst, s.topics)
	after := consumeAsGroup(t, s.dst, app, s.topics, func(*kgo.Record) bool { return true }, func(_ int, last map[string]map[int32]int64) bool {
		for topic, parts := range ends {
			for part, end := range parts {
				at := got[fmt.Sprintf("%s/%d", topic, part)]
				if l, ok := last[topic][part]; ok {
					at = max(at, l+1)
				}
				if end > 0 && at < end {
					return false
				}
			}
		}
		return true
	})
	e.StopCleanly(time.Minute)

	skipped, duplicates, unknown := 0, 0, 0
	known := map[string]bool{}
	for _, r := range p.Records {
		known[r.ID] = true
		if r.Skip {
			continue
		}
		b, a := before[r.ID], after[r.ID]
		if b == 0 && a == 0 {
			skipped++
			if skipped <= 10 {
				t.Errorf("record %s (source %s/%d@%d) was read neither on the source before the move nor on the target after it", r.ID, r.Topic, r.Partition, r.Offset)
			}
		}
		if b > 0 && a > 0 {
			duplicates++
		}
	}
	for id := range after {
		if !known[id] {
			unknown++
		}
	}
	if skipped > 0 || unknown > 0 {
		t.Errorf("the moved group skipped %d records; the target consumer read %d records the source never acknowledged", skipped, unknown)
	}
	// The translation was exact: nothing is read twice.
	if duplicates > 0 {
		t.Errorf("the moved group read %d records again after an exact translation", duplicates)
	}
	s.figures(rep, map[string]any{"group_partitions": len(got), "read_on_source": len(before), "read_on_target": len(after), "skipped": skipped, "reread": duplicates})
}

// consumeAsGroup reads topics on c as a member of group (from the start where the group
// has no offset) until done says so; it processes the records take accepts, commits the
// last of them in every partition, leaves the group, and returns how often it processed
// each record id.
func consumeAsGroup(t *testing.T, c *realkafka.Cluster, group string, topics map[string]int32, take func(*kgo.Record) bool, done func(n int, last map[string]map[int32]int64) bool) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Addrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(e2eharness.TopicNames(topics)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	seen := map[string]int{}
	last := map[string]map[int32]int64{}
	highest := map[string]*kgo.Record{}
	n := 0
	for !done(n, last) {
		fs := cl.PollRecords(ctx, 500)
		if ctx.Err() != nil {
			t.Fatalf("group %s on %s: read %d records, not done within %v", group, c.Name(), n, completeTimeout)
		}
		fs.EachError(func(topic string, part int32, err error) {
			t.Logf("group %s on %s: fetching %s/%d: %v", group, c.Name(), topic, part, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if !take(r) {
				return
			}
			n++
			if h := highest[r.Topic+"/"+fmt.Sprint(r.Partition)]; h == nil || h.Offset < r.Offset {
				highest[r.Topic+"/"+fmt.Sprint(r.Partition)] = r
			}
			if last[r.Topic] == nil {
				last[r.Topic] = map[int32]int64{}
			}
			last[r.Topic][r.Partition] = r.Offset
			for _, h := range r.Headers {
				if h.Key == audit.HeaderID {
					seen[string(h.Value)]++
				}
			}
		})
	}
	var commit []*kgo.Record
	for _, r := range highest {
		commit = append(commit, r)
	}
	if err := cl.CommitRecords(ctx, commit...); err != nil {
		t.Fatalf("group %s on %s: committing: %v", group, c.Name(), err)
	}
	if err := cl.LeaveGroupContext(ctx); err != nil {
		t.Logf("group %s on %s: leaving: %v", group, c.Name(), err)
	}
	return seen
}
