//go:build e2e

package e2e

import (
	"context"
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
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
	first.StopCleanly(time.Minute)

	election := s.dst.kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: topic, Err: kerr.LeaderNotAvailable, Count: -1})
	second := s.startEngine("engine-2", cfg)
	waitLog(t, second, "Joined the consumer group", cfg.Streams, time.Minute)
	during, err := audit.Produce(ctx, s.src.addrs(), audit.Workload{Topics: topics, Records: 2_000, Rate: 10_000, Seed: 2, Run: "during"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, second, "Paused partition until its target topic is ready", int(topics[topic]), time.Minute)
	took := second.StopCleanly(time.Minute)
	if got := s.dst.committed(t, progressGroup)[topic]; !maps.Equal(got, ends) {
		t.Errorf("target-side offsets after a stop while every claim waited for its target topic: %v, want %v (nothing was mirrored meanwhile)", got, ends)
	}

	election.Remove()
	third := s.startEngine("engine-3", cfg)
	produced.Merge(during)
	rep := s.waitCompleteCommitted(produced, audit.Options{})
	third.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"delivery": "exactlyOnce", "isolation": "read_committed", "stop_while_waiting_took": took.Round(time.Millisecond).String()})
}

// waitLog waits until e's log holds at least n lines containing sub.
func waitLog(t *testing.T, e *engine, sub string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for e.CountLog(sub) < n {
		if time.Now().After(deadline) {
			t.Fatalf("engine %s logged %q %d times in %v, want %d; log tail:\n%s", e.Name, sub, e.CountLog(sub), timeout, n, e.LogTail(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestZombiePausedPastDeliveryTimeout (issue 30, item 4): with the delivery watch
// looking at exactly-once claims again, a member paused (SIGSTOP) for longer than
// deliveryTimeout with records in flight must not fail on its own watch when it
// resumes: it could read no answer while stopped. It goes on (learning it was fenced,
// or that its session ended) and stops cleanly later; in both columns nothing is lost,
// and exactly-once shows no duplicate read_committed.
func TestZombiePausedPastDeliveryTimeout(t *testing.T) {
	for name, col := range map[string]column{"atLeastOnce": atLeastOnce, "exactlyOnce": exactlyOnceColumn} {
		t.Run(name, func(t *testing.T) {
			const deliveryTimeout = 5 * time.Second
			s := newScenario(t, stdTopics())
			cfg := s.config(func(c *config.Config) {
				c.Streams = 1
				c.DeliveryTimeout = config.Duration{Duration: deliveryTimeout}
				col.apply(c)
			})
			w := s.stdWorkload(0)
			w.Rate = 4000
			zombie := s.startEngine("zombie", cfg)
			other := s.startEngine("other", cfg)
			bg := s.produce(w)
			bg.WaitSent(w.Records / 4)
			s.waitProgress(2000, time.Minute)
			joins := other.CountLog("Joined the consumer group")
			if err := zombie.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			// The group evicts the paused member after its session timeout and gives its
			// partitions to the other engine; the pause lasts at least twice deliveryTimeout.
			waitLog(t, other, "Joined the consumer group", joins+1, 2*time.Minute)
			s.waitProgress(2000, time.Minute)
			if rest := 2*deliveryTimeout - time.Since(paused); rest > 0 {
				time.Sleep(rest)
			}
			if err := zombie.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			pause := time.Since(paused)
			// The resumed member rejoins the group (a new session) rather than exiting.
			zJoins := zombie.CountLog("Joined the consumer group")
			waitLog(t, zombie, "Joined the consumer group", zJoins+1, 2*time.Minute)
			if line, ok := zombie.ErrorContains("within deliveryTimeout"); ok {
				t.Fatalf("the resumed member failed on deliveryTimeout after a %v pause: %s", pause.Round(time.Second), line)
			}
			p := bg.Wait(t)
			rep := s.waitCompleteIn(col, p, audit.Options{})
			zombie.StopCleanly(time.Minute)
			other.StopCleanly(time.Minute)
			s.assertAudit(rep, col.maxDuplicates(rep.Total.Duplicated))
			s.figures(rep, col.figures(map[string]any{"pause": pause.Round(time.Second).String(), "deliveryTimeout": deliveryTimeout.String()}))
		})
	}
}
