package mirror

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestProduceFailureStopsWithoutCommittingPastIt makes the target refuse one produce
// request (TOPIC_AUTHORIZATION_FAILED, which no retry can fix). The engine must stop
// with an error naming the record, commit no offset past a record that is not on the
// target, and a restarted engine must mirror everything.
func TestProduceFailureStopsWithoutCommittingPastIt(t *testing.T) {
	start := time.Now()
	const partitions = 8
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 3000)

	// Let the first 8000 records through, then refuse one request mid-stream.
	var written, failedPartitions atomic.Int64
	c.target.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if written.Load() < 8000 {
			c.target.KeepControl()
			for _, rt := range pr.Topics {
				for _, rp := range rt.Partitions {
					var batch kmsg.RecordBatch
					if err := batch.ReadFrom(rp.Records); err == nil {
						written.Add(int64(batch.NumRecords))
					}
				}
			}
			return nil, nil, false
		}
		// Fail this one request, every partition in it, and drop the control.
		c.target.DropControl()
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				failedPartitions.Add(1)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	first := startEngine(t, c.testConfig(t), testLogger(t))
	err := first.wait(t, 30*time.Second)
	if err == nil {
		t.Fatal("Run returned nil after the target refused a produce request")
	}
	for _, want := range []string{"while writing source record orders/", "offset", "not authorized"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run error %q does not contain %q", err, want)
		}
	}
	if failedPartitions.Load() == 0 {
		t.Fatal("the injected failure never fired")
	}
	if s := first.e.Stats(); s.SendErrors == 0 || s.Ready {
		t.Fatalf("stats after the failure: send errors %d, ready %v; want > 0, false", s.SendErrors, s.Ready)
	}

	// Every committed offset must be covered by records present on the target: per
	// partition, the records below the committed offset all arrived.
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, partitions)
	before := readTarget(t, c.target, testTopic, 0, time.Second, 20*time.Second)
	var committedTotal int64
	for p := int32(0); p < partitions; p++ {
		have := map[int]bool{}
		for _, r := range before[p] {
			_, i := recordID(t, r)
			have[i] = true
		}
		prefix := 0
		for have[prefix] {
			prefix++
		}
		if committed[p] > int64(prefix) {
			t.Fatalf("partition %d: committed offset %d passes record %d, which is not on the target", p, committed[p], prefix)
		}
		committedTotal += max(committed[p], 0)
	}

	// sarama's idempotent producer bumps its epoch after a refused batch and goes on
	// with the batches already queued, so later records of the refused partitions may
	// be on the target already; the restart writes them again after the refused ones.
	// Nothing is lost; order holds again from the restart on.
	second := startEngine(t, c.testConfig(t), testLogger(t))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, false, false)
	if res.missing != 0 {
		t.Fatalf("after the restart %d records are missing", res.missing)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("produce failure: stopped with %q; %d offsets committed before the stop; after restart %d records on the target for %d, 0 lost, %d duplicates, in %v",
		err, committedTotal, res.records, w.total(), res.duplicates, time.Since(start).Round(time.Millisecond))
}

// TestTransientProduceErrorsAreRetried makes the target answer NOT_ENOUGH_REPLICAS (a
// retriable error) to five produce requests in a row. The engine retries with backoff
// and goes on: nothing lost, nothing duplicated, no send error.
func TestTransientProduceErrorsAreRetried(t *testing.T) {
	const partitions = 4
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 2000)

	var armed atomic.Bool
	var refused atomic.Int64
	c.target.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		if !armed.Load() {
			return nil, nil, false
		}
		if refused.Add(1) >= 5 {
			c.target.DropControl()
		}
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	r := startEngine(t, c.testConfig(t), testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "2000 records mirrored", func() bool { return r.e.Stats().Records >= 2000 })
	armed.Store(true)
	w.produce(t, c.source, 1000)
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 || refused.Load() < 5 {
		t.Fatalf("after %d refused requests: %d missing, %d duplicates; want 5+, 0, 0", refused.Load(), res.missing, res.duplicates)
	}
	if s := r.e.Stats(); s.SendErrors != 0 || !s.Ready {
		t.Fatalf("send errors %d, ready %v after transient errors; want 0, true", s.SendErrors, s.Ready)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d produce requests refused with NOT_ENOUGH_REPLICAS, retried: %d records, 0 lost, 0 duplicates", refused.Load(), res.records)
}

// TestStartsWithDeadTargetBootstrapServers: three of the target's four bootstrap
// servers do not answer (brokers lost, or old addresses left in the list). A producer's
// client knows no broker before its first metadata request, and sarama asked the first
// of its shuffled seeds for the producer id, retrying that same seed: a dead one three
// times in four, for each of the nine producers, and the engine stopped at start with
// "connection refused". The producers now start from a seed that answers. Every record
// is mirrored, on the source side too (three dead addresses in its list as well), with
// offset translation on (its sync and checkpoint producers are made the same way).
func TestStartsWithDeadTargetBootstrapServers(t *testing.T) {
	c := newClusters(t, 2)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Target.BootstrapServers = append([]string{closedAddress(t), closedAddress(t), closedAddress(t)}, c.target.ListenAddrs()...)
		// The source's clients (the group's, the topic loop's) must cope as well.
		cfg.Source.BootstrapServers = append([]string{closedAddress(t), closedAddress(t), closedAddress(t)}, c.source.ListenAddrs()...)
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	})
	w := newWorkload(2)
	w.produce(t, c.source, 50)
	r := startEngine(t, cfg, testLogger(t))
	select {
	case <-r.done:
		t.Fatalf("the engine stopped at start: %v", r.err)
	case <-time.After(3 * time.Second):
	}
	got := readTarget(t, c.target, testTopic, 100, 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if a := audit(t, w, got, true, true); a.missing != 0 {
		t.Errorf("%d records missing", a.missing)
	}
}
