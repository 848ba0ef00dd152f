//go:build e2e

package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// TestStopWhileWaitingForTargetExactlyOnce (issue 30, item 3) with the real binary: an
// exactly-once engine mirrors a topic and stops; a second one starts while the target
// answers metadata for the topic with LEADER_NOT_AVAILABLE (a leader election), new
// records arrive, every claim's first record waits for its target topic, and the engine
// gets SIGTERM. The transactions the stop commits hold no record and must store no
// offset: the target-side offsets stay at the end of what was mirrored (they were set
// back to 0, and a read_committed reader saw every earlier record twice). After the
// election a third engine mirrors the rest: 0 lost, 0 duplicates read_committed.
func TestStopWhileWaitingForTargetExactlyOnce(t *testing.T) {
	const topic = "e2e.orders"
	topics := map[string]int32{topic: 4}
	s := newScenario(t, topics)
	cfg := s.config(exactlyOnceColumn.apply)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produced, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: topics, Records: 20_000, Rate: 10_000, Seed: 1, Run: "before"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ends := s.src.endOffsets(t, topics)[topic]
	progressGroup := mirror.ProgressGroup(s.group)

	first := s.startEngine("engine-1", cfg)
	s.waitCompleteCommitted(produced, audit.Options{})
	deadline := time.Now().Add(time.Minute)
	for !maps.Equal(s.dst.committed(t, progressGroup)[topic], ends) {
		if time.Now().After(deadline) {
			t.Fatalf("the target-side offsets are %v a minute after the records arrived, want the source's end offsets %v",
				s.dst.committed(t, progressGroup)[topic], ends)
		}
		time.Sleep(200 * time.Millisecond)
	}
	first.stop(time.Minute)

	election := s.dst.kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: topic, Err: kerr.LeaderNotAvailable, Count: -1})
	second := s.startEngine("engine-2", cfg)
	waitLog(t, second, "Joined the consumer group", cfg.Streams, time.Minute)
	during, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: topics, Records: 2_000, Rate: 10_000, Seed: 2, Run: "during"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, second, "Paused partition until its target topic is ready", int(topics[topic]), time.Minute)
	took := second.stop(time.Minute)
	if got := s.dst.committed(t, progressGroup)[topic]; !maps.Equal(got, ends) {
		t.Errorf("target-side offsets after a stop while every claim waited for its target topic: %v, want %v (nothing was mirrored meanwhile)", got, ends)
	}

	election.Remove()
	third := s.startEngine("engine-3", cfg)
	produced.Merge(during)
	rep := s.waitCompleteCommitted(produced, audit.Options{})
	third.stop(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"delivery": "exactlyOnce", "isolation": "read_committed", "stop_while_waiting_took": took.Round(time.Millisecond).String()})
}

// waitLog waits until e's log holds at least n lines containing sub.
func waitLog(t *testing.T, e *engine, sub string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for e.countLog(sub) < n {
		if time.Now().After(deadline) {
			t.Fatalf("engine %s logged %q %d times in %v, want %d; log tail:\n%s", e.name, sub, e.countLog(sub), timeout, n, e.logTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
