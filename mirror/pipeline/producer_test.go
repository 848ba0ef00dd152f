package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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
	return newTestProducerWith(t, partitions, maxInFlight, nil, control)
}

// newTestProducerWith is newTestProducer with configure changing the client's config.
func newTestProducerWith(t *testing.T, partitions int32, maxInFlight int, configure func(*sarama.Config), control func(*kfake.Cluster)) (*Producer, *kfake.Cluster) {
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
	if configure != nil {
		configure(sc)
	}
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
	errs := drainErrors(p)
	for m := range p.Successes() {
		i := m.Metadata.(int)
		if i != next[m.Partition] || m.Offset != int64(i) {
			t.Fatalf("partition %d: record %d acked at offset %d, want record %d at offset %d", m.Partition, i, m.Offset, next[m.Partition], next[m.Partition])
		}
		next[m.Partition]++
	}
	if e := errs(); len(e) > 0 {
		t.Fatalf("%d records failed, the first: %v", len(e), e[0])
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

// TestLeaderlessPartitionDoesNotHoldTheOthers: while the target's metadata says
// partition 1 has no leader (its look-up retries, as the engine's client does, for
// longer than the test waits), records for partition 0 of the same producer are still
// sent and acked; once partition 1 has a leader again its records follow, in order.
func TestLeaderlessPartitionDoesNotHoldTheOthers(t *testing.T) {
	var leaderless atomic.Bool
	p, _ := newTestProducerWith(t, 2, 5, func(sc *sarama.Config) {
		sc.Metadata.Retry.Max = 1000
		sc.Metadata.Retry.Backoff = 50 * time.Millisecond
		sc.Metadata.RefreshFrequency = 100 * time.Millisecond
	}, func(cl *kfake.Cluster) {
		cl.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			if !leaderless.Load() {
				return nil, nil, false
			}
			return metadataWithoutLeader(cl, req.(*kmsg.MetadataRequest), "t", 2, 1), nil, true
		})
	})
	// The partition loses its leader once the producer runs; the client's background
	// refresh (which retries while a partition has none) brings that into its cache.
	client := p.client
	leaderless.Store(true)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if w, err := client.WritablePartitions("t"); err == nil && len(w) == 1 && w[0] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's metadata never showed partition 1 without a leader")
		}
	}
	errs := make(chan error, 1)
	go func() {
		for pe := range p.Errors() {
			errs <- pe.Err
		}
		close(errs)
	}()
	const records = 100
	go func() {
		p.Input() <- &sarama.ProducerMessage{Topic: "t", Partition: 1, Value: sarama.StringEncoder("waits"), Metadata: -1}
		for i := range records {
			p.Input() <- &sarama.ProducerMessage{Topic: "t", Partition: 0, Value: sarama.StringEncoder(fmt.Sprint(i)), Metadata: i}
		}
	}()
	acked := 0
	timeout := time.After(30 * time.Second)
	for acked < records {
		select {
		case m := <-p.Successes():
			if m.Partition != 0 || m.Metadata.(int) != acked {
				t.Fatalf("acked record %v of partition %d while partition 1 has no leader, want record %d of partition 0", m.Metadata, m.Partition, acked)
			}
			acked++
		case err := <-errs:
			t.Fatalf("error while partition 1 has no leader: %v", err)
		case <-timeout:
			t.Fatalf("%d of partition 0's %d records acked in 30s while partition 1 had no leader: the leaderless partition holds the others", acked, records)
		}
	}
	leaderless.Store(false)
	select {
	case m := <-p.Successes():
		if m.Partition != 1 || m.Metadata.(int) != -1 {
			t.Fatalf("acked record %v of partition %d, want partition 1's record", m.Metadata, m.Partition)
		}
	case err := <-errs:
		t.Fatalf("partition 1's record failed once it had a leader again: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("partition 1's record was not acked within 30s of its leader coming back")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// metadataWithoutLeader answers req as the one-broker cluster cl would for a topic of
// partitions partitions, except that partition noLeader has no leader.
func metadataWithoutLeader(cl *kfake.Cluster, req *kmsg.MetadataRequest, topic string, partitions, noLeader int32) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Version = req.GetVersion()
	host, port, _ := net.SplitHostPort(cl.ListenAddrs()[0])
	p, _ := strconv.Atoi(port)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
	resp.ControllerID = 0
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(topic)
	for i := range partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = i
		rp.Leader, rp.Replicas, rp.ISR = 0, []int32{0}, []int32{0}
		if i == noLeader {
			rp.ErrorCode = kerr.LeaderNotAvailable.Code
			rp.Leader = -1
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = []kmsg.MetadataResponseTopic{rt}
	return resp
}

// TestProducerAnswerLostAfterTheWrite: the broker writes a Produce request's batches
// and its answer is lost (the connection closes before it is sent), four times, with up
// to 5 requests in flight. The producer sends the un-acked batches again with the same
// sequences; the broker recognises them, so every record is on the partition once, in
// order, and acked once with the offset it has there.
func TestProducerAnswerLostAfterTheWrite(t *testing.T) {
	const perPartition = 3000
	var produces, lost atomic.Int64
	var forwarding atomic.Bool
	var direct *kgo.Client
	p, cl := newTestProducer(t, 2, 5, func(cl *kfake.Cluster) {
		cl.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			if forwarding.Load() || produces.Add(1)%25 != 0 || lost.Load() >= 4 {
				return nil, nil, false // written and answered as usual
			}
			// Write it through another connection, then close this one unanswered.
			forwarding.Store(true)
			var err error
			cl.SleepControl(func() {
				_, err = direct.Broker(0).Request(context.Background(), req)
			})
			forwarding.Store(false)
			if err != nil {
				t.Errorf("writing the request whose answer is lost: %v", err)
			}
			lost.Add(1)
			return nil, errors.New("the answer is lost"), true
		})
		var err error
		if direct, err = kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(direct.Close)
	})
	go func() {
		for i := range perPartition {
			for part := int32(0); part < 2; part++ {
				p.Input() <- &sarama.ProducerMessage{Topic: "t", Partition: part, Value: sarama.StringEncoder(fmt.Sprintf("%0200d", i)), Metadata: i}
			}
		}
		p.AsyncClose()
	}()
	errs := drainErrors(p)
	next := map[int32]int{}
	for m := range p.Successes() {
		i := m.Metadata.(int)
		if i != next[m.Partition] {
			t.Fatalf("partition %d: record %d acked, want record %d", m.Partition, i, next[m.Partition])
		}
		if m.Offset != int64(i) && m.Offset != -1 {
			t.Fatalf("partition %d: record %d acked at offset %d: written more than once", m.Partition, i, m.Offset)
		}
		next[m.Partition]++
	}
	if e := errs(); len(e) > 0 {
		t.Fatalf("%d records failed, the first: %v", len(e), e[0])
	}
	if next[0] != perPartition || next[1] != perPartition || lost.Load() < 4 {
		t.Fatalf("acked %v, want %d per partition; %d answers lost, want 4", next, perPartition, lost.Load())
	}
	// What the partitions hold: each record once, in order.
	for part := int32(0); part < 2; part++ {
		got := readPartition(t, cl, "t", part, perPartition)
		for i, v := range got {
			if want := fmt.Sprintf("%0200d", i); v != want {
				t.Fatalf("partition %d offset %d holds %.20s..., want record %d: a batch was written twice or lost", part, i, v, i)
			}
		}
	}
}

// drainErrors takes every error p hands back, so that p never waits on its Errors
// channel; the function it returns waits until p closed the channel and returns them.
func drainErrors(p *Producer) func() []error {
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pe := range p.Errors() {
			errs = append(errs, pe.Err)
		}
	}()
	return func() []error {
		<-done
		return errs
	}
}

// readPartition reads the partition from its start until it has want records, and
// waits a moment for more; it returns the values it read.
func readPartition(t *testing.T, cl *kfake.Cluster, topic string, part int32, want int) []string {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var vals []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(vals) < want+1 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
		if len(vals) >= want && ctx.Err() == nil {
			// Anything written twice would be in the same fetches: one more short poll.
			short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
			c.PollFetches(short).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
			cancelShort()
			break
		}
	}
	if len(vals) != want {
		t.Fatalf("partition %d holds %d records, want %d", part, len(vals), want)
	}
	return vals
}

// TestDeliveryTimeoutCountsFromTheFirstFailure: deliveryTimeout bounds how long a record
// is retried. The target answers the first request after 800 ms, and then every request,
// with NOT_LEADER: the record is handed back no sooner than the delivery timeout (1 s)
// after that first failure, not 1 s after it was sent.
func TestDeliveryTimeoutCountsFromTheFirstFailure(t *testing.T) {
	var firstFailure atomic.Int64
	p, _ := newTestProducer(t, 1, 5, func(cl *kfake.Cluster) {
		cl.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			if firstFailure.Load() == 0 {
				cl.SleepControl(func() { time.Sleep(800 * time.Millisecond) })
				firstFailure.Store(time.Now().UnixNano())
			}
			r := req.(*kmsg.ProduceRequest)
			resp := r.ResponseKind().(*kmsg.ProduceResponse)
			resp.Version = r.Version
			for _, rt := range r.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
	})
	p.opts.DeliveryTimeout = time.Second
	p.Input() <- &sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("x")}
	select {
	case pe := <-p.Errors():
		retried := time.Since(time.Unix(0, firstFailure.Load()))
		if retried < time.Second {
			t.Fatalf("handed back %v after the first failure, before the delivery timeout of 1s: %v", retried, pe.Err)
		}
	case m := <-p.Successes():
		t.Fatalf("record %v acked by a target that refuses every request", m)
	case <-time.After(30 * time.Second):
		t.Fatal("the record was not handed back within 30s")
	}
	p.AsyncClose()
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
	errs := drainErrors(p)
	acked := 0
	for range p.Successes() {
		acked++
	}
	if e := errs(); len(e) > 0 {
		t.Fatalf("%d records failed, the first: %v", len(e), e[0])
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
