package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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

// TestProducerKeepsKeysHeadersAndTimestamps: the records a batch carries are written
// as they were handed over (key, value, headers by value, timestamp to the millisecond,
// or the send time when unset), batches of several records sharing the per-batch
// record and header storage, across many batches of a 4 KiB cap.
func TestProducerKeepsKeysHeadersAndTimestamps(t *testing.T) {
	const n = 600
	p, cl := newTestProducer(t, 1, 5, nil)
	base := time.UnixMilli(1_700_000_000_000)
	want := make([]*sarama.ProducerMessage, n)
	start := time.Now().Truncate(time.Millisecond)
	go func() {
		for i := range n {
			m := &sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder(fmt.Sprintf("value-%d-%0100d", i, i))}
			if i%5 != 0 {
				m.Key = sarama.StringEncoder(fmt.Sprintf("key-%d", i))
			}
			for h := range i % 4 {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: fmt.Appendf(nil, "h%d", h), Value: fmt.Appendf(nil, "%d-%d", i, h)})
			}
			if i%7 != 0 {
				// Timestamps out of order within a batch, with sub-millisecond parts.
				m.Timestamp = base.Add(time.Duration(i%13)*time.Second - time.Duration(i%3)*time.Minute + 123*time.Microsecond)
			}
			want[i] = m
			p.Input() <- m
		}
		p.AsyncClose()
	}()
	acked := 0
	for range p.Successes() {
		acked++
	}
	for pe := range p.Errors() {
		t.Fatalf("error: %v", pe.Err)
	}
	if acked != n {
		t.Fatalf("%d acked, want %d", acked, n)
	}
	end := time.Now()
	c, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got[:n] {
		m := want[i]
		wantKey, _ := encoded(m.Key)
		wantValue, _ := encoded(m.Value)
		if r.Offset != int64(i) || !bytes.Equal(r.Key, wantKey) || !bytes.Equal(r.Value, wantValue) {
			t.Fatalf("record %d: offset %d key %q value %q, want key %q value %q", i, r.Offset, r.Key, r.Value, wantKey, wantValue)
		}
		if len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(m.Headers))
		}
		for h, rh := range r.Headers {
			if rh.Key != string(m.Headers[h].Key) || !bytes.Equal(rh.Value, m.Headers[h].Value) {
				t.Fatalf("record %d header %d: %q=%q, want %q=%q", i, h, rh.Key, rh.Value, m.Headers[h].Key, m.Headers[h].Value)
			}
		}
		if m.Timestamp.IsZero() {
			if r.Timestamp.Before(start) || r.Timestamp.After(end) {
				t.Fatalf("record %d: timestamp %v, want the send time between %v and %v", i, r.Timestamp, start, end)
			}
		} else if !r.Timestamp.Equal(m.Timestamp.Truncate(time.Millisecond)) {
			t.Fatalf("record %d: timestamp %v, want %v", i, r.Timestamp, m.Timestamp.Truncate(time.Millisecond))
		}
	}
}

func encoded(e sarama.Encoder) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	return e.Encode()
}
