package pipeline

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newTestProducer starts a kfake cluster with topic "t" of partitions partitions, and
// a Producer with maxInFlight over a client configured as the engine's.
func newTestProducer(t *testing.T, partitions int32, maxInFlight int, control func(*kfake.Cluster)) (*Producer, *kfake.Cluster) {
	t.Helper()
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if control != nil {
		control(cl)
	}
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Return.Successes = true
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	sc.Producer.MaxMessageBytes = 4096
	sc.Net.MaxOpenRequests = maxInFlight
	client, err := sarama.NewClient(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	p, err := New(client, Options{MaxInFlight: maxInFlight, DeliveryTimeout: 30 * time.Second,
		Backoff: func(int) time.Duration { return 20 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	return p, cl
}

// TestProducerAcksInOrderWithOffsets sends records to two partitions in batches of a
// few records (4 KiB) with 5 in flight: every record comes back on Successes once, in
// its partition's order, with the offset it has on the partition.
func TestProducerAcksInOrderWithOffsets(t *testing.T) {
	const perPartition = 2000
	p, _ := newTestProducer(t, 2, 5, nil)
	go func() {
		for i := range perPartition {
			for part := int32(0); part < 2; part++ {
				p.Input() <- &sarama.ProducerMessage{Topic: "t", Partition: part, Value: sarama.StringEncoder(fmt.Sprintf("%0200d", i)), Metadata: i}
			}
		}
		p.AsyncClose()
	}()
	next := map[int32]int{}
	errs := make(chan error, 1)
	go func() {
		for pe := range p.Errors() {
			errs <- pe.Err
		}
		close(errs)
	}()
	for m := range p.Successes() {
		i := m.Metadata.(int)
		if i != next[m.Partition] || m.Offset != int64(i) {
			t.Fatalf("partition %d: record %d acked at offset %d, want record %d at offset %d", m.Partition, i, m.Offset, next[m.Partition], next[m.Partition])
		}
		next[m.Partition]++
	}
	for err := range errs {
		t.Fatalf("error: %v", err)
	}
	if next[0] != perPartition || next[1] != perPartition {
		t.Fatalf("acked %v, want %d per partition", next, perPartition)
	}
}

// TestProducerRetriesInitProducerID: a target whose transaction coordinator is still
// loading answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS (a fresh Kafka 4.4
// cluster did); New retries until it gets an ID.
func TestProducerRetriesInitProducerID(t *testing.T) {
	var refused atomic.Int64
	p, _ := newTestProducer(t, 1, 5, func(cl *kfake.Cluster) {
		cl.ControlKey(kmsg.InitProducerID.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			if refused.Add(1) >= 3 {
				cl.DropControl()
			} else {
				cl.KeepControl()
			}
			resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.Version = req.GetVersion()
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			resp.ProducerID = -1
			return resp, nil, true
		})
	})
	if id, _ := p.ProducerID(); id < 0 || refused.Load() < 3 {
		t.Fatalf("producer ID %d after %d refusals, want an ID after 3", id, refused.Load())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
