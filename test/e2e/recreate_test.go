//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
)

// recreatedTopic is the source topic the re-creation tests delete and create again;
// the scenario's other topic goes on untouched.
const recreatedTopic = "e2e.orders"

// TestSourceTopicRecreated: a mirrored source topic is deleted and created again under
// the same name (a new topic ID) and written to, once while the engine runs and once
// while it is stopped. The new topic's offsets start again at 0 and Kafka drops the old
// topic's commits, but the engine's own stored positions said "offset 5,000": without
// the topic ID in them the new topic's first records were skipped without a word. 0
// lost, 0 duplicates, order kept within each incarnation, and the engine log names the
// re-creation. TestSourceTopicRecreatedExactlyOnce is its exactly-once column.
func TestSourceTopicRecreated(t *testing.T) { sourceTopicRecreated(t, atLeastOnce) }

// TestSourceTopicRecreatedExactlyOnce is TestSourceTopicRecreated with delivery
// exactlyOnce: the offset stored in the last transaction names the old topic's ID, so
// the new topic starts at its beginning; read_committed, every record once.
func TestSourceTopicRecreatedExactlyOnce(t *testing.T) { sourceTopicRecreated(t, exactlyOnceColumn) }

func sourceTopicRecreated(t *testing.T, col column) {
	for _, stopped := range []bool{false, true} {
		name := "running"
		if stopped {
			name = "stopped"
		}
		t.Run(name, func(t *testing.T) {
			topics := map[string]int32{recreatedTopic: stdPartitions, "e2e.payments": stdPartitions}
			s := newScenario(t, topics)
			cfg := s.config(col.apply)
			workload := func(run string) audit.Workload {
				w := s.stdWorkload(0)
				w.Records, w.Rate, w.Run = 40_000, 10_000, run
				return w
			}
			e := s.startEngine("engine-0", cfg)
			before := s.produce(workload("before")).Wait(t)
			s.readUntil(col, before)

			if stopped {
				e.StopCleanly(time.Minute)
			}
			s.recreateSourceTopic(recreatedTopic, stdPartitions, !stopped)
			after := s.produce(workload("after")).Wait(t)
			if stopped {
				e = s.startEngine("engine-1", cfg)
			}
			all := &audit.Produced{}
			all.Merge(before)
			all.Merge(after)
			m := s.readUntil(col, all)

			lost, dups, order := e2eharness.AuditIncarnations(t, m, before, after)
			if line, ok := e.LogContains("source topic was deleted and created again", recreatedTopic); !ok {
				t.Errorf("no log line says the source topic was re-created")
			} else {
				t.Logf("engine: %s", line)
			}
			e.StopCleanly(time.Minute)
			rep := audit.Audit(all, m, audit.Options{})
			s.figures(rep, col.figures(map[string]any{"recreated": recreatedTopic, "stopped_during": stopped,
				"lost": lost, "duplicated": dups, "out_of_order": order}))
		})
	}
}

// readUntil reads the target (read_committed in the exactly-once column) until it holds
// every record of p, and returns what it read.
func (s *scenario) readUntil(col column, p *audit.Produced) *audit.Mirrored {
	s.t.Helper()
	return e2eharness.ReadUntil(s.t, s.dst.addrs(), e2eharness.TopicNames(s.topics), col.exactlyOnce, p, completeTimeout)
}

// recreateSourceTopic deletes topic on the source and creates it again with partitions
// partitions. With waitForFetch, the topic is created again only after a fetch of it
// reached the broker once it was gone, as it does on Kafka, whose deletion takes a
// while; kfake's takes no time.
func (s *scenario) recreateSourceTopic(topic string, partitions int32, waitForFetch bool) {
	s.t.Helper()
	fetched := make(chan struct{})
	if waitForFetch {
		var once sync.Once
		s.src.kf.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			s.src.kf.KeepControl()
			for _, ft := range req.(*kmsg.FetchRequest).Topics {
				if ft.Topic == topic {
					once.Do(func() { close(fetched) })
				}
			}
			return nil, nil, false
		})
	} else {
		close(fetched)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = []string{topic}
	resp, err := req.RequestWith(context.Background(), s.src.admin(s.t))
	if err != nil {
		s.t.Fatalf("deleting source topic %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			s.t.Fatalf("deleting source topic %s: %v", topic, err)
		}
	}
	select {
	case <-fetched:
	case <-time.After(time.Minute):
		s.t.Fatalf("no fetch of the deleted topic %s within a minute", topic)
	}
	s.src.createTopics(s.t, map[string]int32{topic: partitions}, nil)
}
