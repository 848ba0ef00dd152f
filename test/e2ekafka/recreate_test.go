//go:build kafka

package e2ekafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRecreatedSourceTopicOnRealKafka is test/e2e's TestSourceTopicRecreated (issue 30
// item 1) on a real broker, whose topic IDs come from its real metadata: a mirrored
// source topic (500 records per partition mirrored) is deleted while the engine runs
// (or while it is stopped), created again with the same partitions, and written to (800 per partition). The new
// topic's offsets start again at 0 while the engine's stored position says 500: every
// one of the 800 per partition must reach the target (which then holds the old 500 and
// the new 800), in order, once, and the engine log names the re-creation. Its
// exactly-once column is a subtest, read_committed.
func TestRecreatedSourceTopicOnRealKafka(t *testing.T) {
	for _, col := range []column{{}, {exactlyOnce: true}} {
		name := "atLeastOnce"
		if col.exactlyOnce {
			name = "exactlyOnce"
		}
		for _, stopped := range []bool{false, true} {
			during := "running"
			if stopped {
				during = "stopped"
			}
			t.Run(name+"/"+during, func(t *testing.T) { recreatedSourceTopic(t, col, stopped) })
		}
	}
}

// recreatedSourceTopic runs the scenario with the engine running through the
// re-creation, or stopped during it (restarted after the new records were written).
func recreatedSourceTopic(t *testing.T, col column, stopped bool) {
	const (
		topic      = "e2e.orders"
		partitions = 4
		before     = 500 // records per partition mirrored before the deletion
		after      = 800 // written to the new topic
	)
	s := newScenario(t, world{}, map[string]int32{topic: partitions, "e2e.payments": partitions})
	cfg := s.config(col.apply)
	workload := func(run string, perPartition int) audit.Workload {
		w := s.workload(perPartition*e2eharness.Partitions(s.topics), 0, 0)
		w.Run = run
		return w
	}
	e := s.startJoined("engine", cfg)
	p1 := s.produce(workload("before", before)).Wait(t)
	s.readTargetUntil(col, p1)
	if !col.exactlyOnce {
		// Its stored position is the old topic's end (exactly-once stores it in the
		// transaction that wrote the records just read).
		s.waitCommitted(int64(len(p1.Records)), 2*time.Minute)
	}

	if stopped {
		e.StopCleanly(time.Minute)
	}
	s.deleteAndRecreateSourceTopic(topic, partitions)
	p2 := s.produce(workload("after", after)).Wait(t)
	if s.refused > 0 {
		// Each of them would pass the audit unseen: the scenario needs every one.
		t.Fatalf("the source refused %d records of the new topic: the test must wait longer for it", s.refused)
	}
	if stopped {
		e = s.startEngine("engine-restarted", cfg)
	}
	all := &audit.Produced{}
	all.Merge(p1)
	all.Merge(p2)
	m := s.readTargetUntil(col, all)

	lost, dups, order := e2eharness.AuditIncarnations(t, m, p1, p2)
	ends := endOffsets(t, s.dst, s.topics)
	for part := range int32(partitions) {
		if got := ends[topic][part]; got != before+after && !col.exactlyOnce {
			t.Errorf("target %s/%d ends at %d, want the old %d and the new %d", topic, part, got, before, after)
		}
	}
	line, ok := e.LogContains("source topic was deleted and created again", topic)
	if !ok {
		t.Errorf("no log line says the source topic was re-created")
	} else {
		t.Logf("engine: %.400s", line)
	}
	e.StopCleanly(time.Minute)
	rep := audit.Audit(all, m, audit.Options{})
	f := col.figures(map[string]any{"recreated": topic, "per_partition_before": before, "per_partition_after": after, "stopped_during": stopped,
		"lost": lost, "duplicated": dups, "out_of_order": order})
	f["brokers"] = 1
	s.figures(rep, f)
}

// readTargetUntil reads the target (read_committed in the exactly-once column) until it holds
// every record of p, and returns what it read.
func (s *scenario) readTargetUntil(col column, p *audit.Produced) *audit.Mirrored {
	s.t.Helper()
	return e2eharness.ReadUntil(s.t, s.dst.Addrs(), e2eharness.TopicNames(s.topics), col.exactlyOnce, p, completeTimeout)
}

// deleteAndRecreateSourceTopic deletes topic on the source and creates it again with partitions
// partitions as soon as the broker lets it (a deletion on Kafka takes a moment: the
// name is taken until it completed).
func (s *scenario) deleteAndRecreateSourceTopic(topic string, partitions int32) {
	s.t.Helper()
	if err := retry(func(ctx context.Context) error {
		resp, err := s.src.Admin().DeleteTopics(ctx, topic)
		if err == nil {
			err = resp.Error()
		}
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil
		}
		return err
	}); err != nil {
		s.t.Fatalf("deleting source topic %s: %v", topic, err)
	}
	if err := retry(func(ctx context.Context) error {
		res, err := s.src.Admin().CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil {
			err = res.Err
		}
		return err
	}); err != nil {
		s.t.Fatalf("creating source topic %s again: %v", topic, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.src.WaitInSync(ctx, topic); err != nil {
		s.t.Fatal(err)
	}
	// The metadata names the new topic before its partitions take writes (Kafka
	// applies the creation to the broker's logs asynchronously, and a produce then
	// gets UNKNOWN_TOPIC_OR_PARTITION, 3,200 of 3,200 records in one run): wait until
	// every partition's log answers, at offset 0.
	if err := retry(func(ctx context.Context) error {
		listed, err := s.src.Admin().ListEndOffsets(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			n := 0
			listed.Each(func(o kadm.ListedOffset) {
				if o.Offset == 0 {
					n++
				}
			})
			if n != int(partitions) {
				err = fmt.Errorf("%d of %d partitions of the new %s answer at offset 0", n, partitions, topic)
			}
		}
		return err
	}); err != nil {
		s.t.Fatalf("the re-created source topic %s takes no writes: %v", topic, err)
	}
}
