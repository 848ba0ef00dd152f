package mirror

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestPipelinedProducerAuditedTests runs audited engine tests through the pipelined
// producer (producer.maxInFlightRequests 5): a clean mirror, the pool's order with
// switches to the single-record producer, transient produce errors, a refused request
// that stops the engine (and the restart that loses nothing), and a target limit
// lowered while mirroring (MESSAGE_TOO_LARGE for batches of several records, sent
// again alone through resendAlone).
func TestPipelinedProducerAuditedTests(t *testing.T) {
	tests := map[string]func(*testing.T){
		"end to end":                  TestMirrorEndToEnd,
		"pool order":                  TestProducerPoolKeepsOrderPerPartition,
		"transient errors retried":    TestTransientProduceErrorsAreRetried,
		"refused request stops":       TestProduceFailureStopsWithoutCommittingPastIt,
		"limit lowered, resent alone": TestTargetLimitLoweredWhileMirroring,
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KAFKA_MIRROR_TEST_MAX_IN_FLIGHT", "5")
			test(t)
		})
	}
}

// sequenceWatch reads the record batches of every produce request the target is
// sent and counts resends, a batch whose first sequence is not above one the same
// producer already sent to that partition, and among them rewinds, below it: a batch
// sent again after later batches of its partition were sent, that is with requests in
// flight behind it.
type sequenceWatch struct {
	mu      sync.Mutex
	highest map[string]int32 // producer/topic/partition -> highest first sequence
	resends atomic.Int64
	rewinds atomic.Int64
	batches atomic.Int64
}

func (w *sequenceWatch) observe(pr *kmsg.ProduceRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.highest == nil {
		w.highest = map[string]int32{}
	}
	for _, rt := range pr.Topics {
		for _, rp := range rt.Partitions {
			var b kmsg.RecordBatch
			if b.ReadFrom(rp.Records) != nil {
				continue
			}
			w.batches.Add(1)
			k := fmt.Sprintf("%d/%s/%d", b.ProducerID, rt.Topic, rp.Partition)
			if h, ok := w.highest[k]; ok && b.FirstSequence <= h {
				w.resends.Add(1)
				if b.FirstSequence < h {
					w.rewinds.Add(1)
				}
			} else {
				w.highest[k] = b.FirstSequence
			}
		}
	}
}

// refuse answers every partition of pr with code.
func refuse(pr *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = pr.Version
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// pipelinedConfig is the test config with producer.maxInFlightRequests 5 and small
// batches (16 KiB), so each partition has several batches in flight.
func pipelinedConfig(t *testing.T, c *testClusters) *config.Config {
	return c.testConfig(t, func(cfg *config.Config) {
		cfg.Producer = &config.Producer{MaxInFlightRequests: 5, MaxMessageBytes: 16 << 10}
		cfg.DeliveryTimeout.Duration = 60 * time.Second
	})
}

// mirrorThroughFaults mirrors 4 partitions of 1,500 records of 400 bytes through the
// pipelined producer while fault acts on the target, and checks that every record
// arrived exactly once and in its partition's order (the retries resend with the same
// sequences, so the target writes nothing twice) with no send error.
func mirrorThroughFaults(t *testing.T, c *testClusters, during func(r *runningEngine)) auditResult {
	t.Helper()
	const partitions, perPartition = 4, 1500
	w := newWorkload(partitions)
	w.valueBytes = 400
	w.produce(t, c.source, perPartition)
	r := startEngine(t, pipelinedConfig(t, c), testLogger(t))
	if during != nil {
		during(r)
	}
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("%d missing, %d duplicates; want 0, 0", res.missing, res.duplicates)
	}
	if s := r.e.Stats(); s.SendErrors != 0 {
		t.Fatalf("%d send errors, want 0", s.SendErrors)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPipelinedProducerResendsAfterNotLeader answers every 8th produce request with
// NOT_LEADER_OR_FOLLOWER for every partition in it while the partitions have later
// batches in flight (each request is held 5 ms, so they pile up): those later batches
// are refused as out of order by the target, and the producer must wait for them,
// then send everything un-acked again in order with the same sequences. Every record
// arrives once, in order; the rewinds prove batches were in flight behind a refused one.
func TestPipelinedProducerResendsAfterNotLeader(t *testing.T) {
	c := newClusters(t, 4)
	createTopic(t, c.target, testTopic, 4, nil)
	var seen sequenceWatch
	var requests, refused atomic.Int64
	c.target.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		seen.observe(pr)
		c.target.SleepControl(func() { time.Sleep(5 * time.Millisecond) })
		if requests.Add(1)%8 == 0 && refused.Load() < 40 {
			refused.Add(1)
			return refuse(pr, kerr.NotLeaderForPartition.Code), nil, true
		}
		return nil, nil, false
	})
	res := mirrorThroughFaults(t, c, nil)
	if refused.Load() == 0 || seen.rewinds.Load() == 0 {
		t.Fatalf("%d requests refused, %d batches sent again behind later ones; want both > 0", refused.Load(), seen.rewinds.Load())
	}
	t.Logf("%d of %d produce requests refused with NOT_LEADER_OR_FOLLOWER, %d batches sent again behind later ones (%d batches in all): %d records, 0 lost, 0 duplicates",
		refused.Load(), requests.Load(), seen.rewinds.Load(), seen.batches.Load(), res.records)
}

// TestPipelinedProducerResendsAfterDroppedConnections closes the connection on every
// 10th produce request (the request and whatever followed it on that connection get
// no answer), requests held 5 ms so several are in flight. Every record arrives once,
// in order.
func TestPipelinedProducerResendsAfterDroppedConnections(t *testing.T) {
	c := newClusters(t, 4)
	createTopic(t, c.target, testTopic, 4, nil)
	var seen sequenceWatch
	var requests, dropped atomic.Int64
	c.target.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		seen.observe(pr)
		c.target.SleepControl(func() { time.Sleep(5 * time.Millisecond) })
		if requests.Add(1)%10 == 0 && dropped.Load() < 25 {
			dropped.Add(1)
			return nil, errors.New("connection dropped by the test"), true
		}
		return nil, nil, false
	})
	res := mirrorThroughFaults(t, c, nil)
	if dropped.Load() == 0 || seen.resends.Load() == 0 {
		t.Fatalf("%d connections dropped, %d batches sent again; want both > 0", dropped.Load(), seen.resends.Load())
	}
	t.Logf("%d of %d produce requests dropped with their connection, %d batches sent again: %d records, 0 lost, 0 duplicates",
		dropped.Load(), requests.Load(), seen.resends.Load(), res.records)
}

// TestPipelinedProducerFollowsLeaderMoves moves the target partitions' leaders
// between three brokers every 10 ms while the records are mirrored: requests to the
// old leader are refused (NOT_LEADER_OR_FOLLOWER), the producer refreshes its
// metadata and sends again to the new one. Every record arrives once, in order.
func TestPipelinedProducerFollowsLeaderMoves(t *testing.T) {
	c := newClusters(t, 4, kfake.NumBrokers(3))
	createTopic(t, c.target, testTopic, 4, nil)
	var seen sequenceWatch
	c.target.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		seen.observe(req.(*kmsg.ProduceRequest))
		c.target.SleepControl(func() { time.Sleep(5 * time.Millisecond) })
		return nil, nil, false
	})
	var moves atomic.Int64
	res := mirrorThroughFaults(t, c, func(r *runningEngine) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if c.target.MoveTopicPartition(testTopic, int32(i%4), int32(i%3)) == nil {
					moves.Add(1)
				}
			}
		}()
		testutil.WaitFor(t, 2*time.Minute, "6000 records mirrored", func() bool { return r.e.Stats().Records >= 6000 })
		close(stop)
		<-done
	})
	if moves.Load() == 0 || seen.resends.Load() == 0 {
		t.Fatalf("%d leader moves, %d batches sent again; want both > 0", moves.Load(), seen.resends.Load())
	}
	t.Logf("%d leader moves while mirroring, %d batches sent again: %d records, 0 lost, 0 duplicates", moves.Load(), seen.resends.Load(), res.records)
}
