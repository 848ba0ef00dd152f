package mirror

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// slowTarget makes the target answer every produce request after a delay (set and
// changed through the returned control), so that records pile up in the producer while
// a request is in flight and its batches grow. The control function sleeps without
// holding up the rest of the cluster.
func slowTarget(cl *kfake.Cluster, delay time.Duration) *slowControl {
	sc := &slowControl{}
	sc.delay.Store(int64(delay))
	cl.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		sc.requests.Add(1)
		if d := time.Duration(sc.delay.Load()); d > 0 {
			cl.SleepControl(func() { time.Sleep(d) })
		}
		return nil, nil, false
	})
	return sc
}

// slowControl counts the produce requests and holds the delay of slowTarget.
type slowControl struct {
	requests atomic.Int64
	delay    atomic.Int64 // nanoseconds
}

// createTopic creates topic on cl with partitions and configs (a kfake topic accepts
// max.message.bytes and enforces it on the whole record batch, header included:
// kfake 00_produce.go compares len(records) with the topic's value, falling back to
// the broker's message.max.bytes).
func createTopic(t *testing.T, cl *kfake.Cluster, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: entries}, false); err != nil {
		t.Fatalf("creating topic %q: %v", topic, err)
	}
}

// alterTopic sets configs on an existing topic of cl.
func alterTopic(t *testing.T, cl *kfake.Cluster, topic string, configs map[string]string) {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	if err := admin.AlterConfig(sarama.TopicResource, topic, entries, false); err != nil {
		t.Fatalf("altering topic %q: %v", topic, err)
	}
}

// TestSmallTargetTopicLimitMirrorsEverything is the reproduction of issue 12 §1: a
// target topic with max.message.bytes 65536, a backlog of 20,000 records of 1 KB and a
// target answering in 50 ms. Before the batches followed the target's limit, sarama
// gathered ~1 MiB per partition while a request was in flight, the target refused it
// with MESSAGE_TOO_LARGE and the engine stopped after the first record. Now every
// record arrives, once, in order.
func TestSmallTargetTopicLimitMirrorsEverything(t *testing.T) {
	start := time.Now()
	const partitions = 2
	c := newClusters(t, partitions)
	createTopic(t, c.target, testTopic, partitions, map[string]string{"max.message.bytes": "65536"})
	w := newWorkload(partitions)
	w.valueBytes = 1 << 10
	w.produce(t, c.source, 10000)
	requests := slowTarget(c.target, 50*time.Millisecond)

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout.Duration = 30 * time.Second }), testLogger(t))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 120*time.Second)
	res := audit(t, w, got, true, true)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("target holds %d records for %d: %d missing, %d duplicates; want all, once", res.records, w.total(), res.missing, res.duplicates)
	}
	s := r.e.Stats()
	if s.SendErrors != 0 {
		t.Fatalf("%d send errors, want 0", s.SendErrors)
	}
	// Batches were built, not records sent one by one: 20,000 records in far fewer
	// requests than records.
	if n := requests.requests.Load(); n >= int64(w.total())/10 {
		t.Fatalf("%d produce requests for %d records: the records were not batched", n, w.total())
	}
	if batchCap := r.e.sender.limits.batchCap; batchCap != 65536-recordBatchOverhead {
		t.Fatalf("batch cap %d, want %d (the target topic's limit minus the batch header)", batchCap, 65536-recordBatchOverhead)
	}
	t.Logf("64 KB target limit: %d records of 1 KB mirrored in %d produce requests, 0 lost, 0 duplicates, order kept, in %v",
		res.records, requests.requests.Load(), time.Since(start).Round(time.Millisecond))
}

// TestTargetLimitLoweredWhileMirroring lowers the target topic's max.message.bytes from
// 1 MiB to 64 KB while batches of up to 1 MiB are on their way: the target refuses them
// with MESSAGE_TOO_LARGE, which is not fatal: the engine sends their records again one
// by one, then reads the new limit and goes on. Nothing is lost or duplicated; order
// may break only for the records queued behind a refused batch (the documented
// exception), so it is counted, not required.
func TestTargetLimitLoweredWhileMirroring(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	createTopic(t, c.target, testTopic, partitions, nil)
	w := newWorkload(partitions)
	w.valueBytes = 1 << 10
	w.produce(t, c.source, 4000)
	slow := slowTarget(c.target, 50*time.Millisecond)

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout.Duration = 30 * time.Second }), testLogger(t))
	testutil.WaitFor(t, 30*time.Second, "the first records mirrored", func() bool { return r.e.Stats().Records > 500 })
	alterTopic(t, c.target, testTopic, map[string]string{"max.message.bytes": "65536"})
	testutil.WaitFor(t, 30*time.Second, "a refused batch sent again", func() bool { return r.e.sender.resent.Load() > 0 })
	slow.delay.Store(0)
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 120*time.Second)
	res := audit(t, w, got, true, false)
	late := 0 // records that arrived after a later record of their partition
	for _, recs := range got {
		last := -1
		for _, rec := range recs {
			_, i := recordID(t, rec)
			if i < last {
				late++
			}
			last = max(last, i)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil: a refused batch of several records must not be fatal", err)
	}
	if res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("%d missing, %d duplicates; want 0, 0", res.missing, res.duplicates)
	}
	if s := r.e.Stats(); s.SendErrors != 0 {
		t.Fatalf("%d send errors, want 0", s.SendErrors)
	}
	t.Logf("target limit lowered to 64 KB mid-stream: %d records sent again alone; %d records, 0 lost, 0 duplicates, %d arrived after a later record of their partition",
		r.e.sender.resent.Load(), res.records, late)
}

// sizedRecords writes, in order, one record per size to partition 0 of topic, each
// with an "id" header "0/<index>" and a value of that many bytes that encodes its index.
func sizedRecords(t *testing.T, cl *kfake.Cluster, topic string, sizes []int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(8<<20), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	recs := make([]*kgo.Record, len(sizes))
	for i, n := range sizes {
		recs[i] = &kgo.Record{Topic: topic, Value: sizedValue(i, n), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(fmt.Sprintf("0/%d", i))}}}
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func sizedValue(i, n int) []byte {
	head := []byte(strconv.Itoa(i) + ":")
	return append(head, bytes.Repeat([]byte{byte('a' + i%26)}, max(n-len(head), 0))...)
}

// TestLargeRecordWithLargeLimitsArrivesIntact mirrors a 2 MB record between topics
// that both allow 5 MB, in the middle of small records, while a second mirrored topic
// allows only 64 KB: the batches are capped at 64 KB, so the large record goes through
// the single-record producer, and the partition's order holds across the switch.
func TestLargeRecordWithLargeLimitsArrivesIntact(t *testing.T) {
	const small, big = "small", 2 << 20
	c := newClusters(t, 1)
	fiveMB := map[string]string{"max.message.bytes": strconv.Itoa(5 << 20)}
	alterTopic(t, c.source, testTopic, fiveMB)
	createTopic(t, c.source, small, 1, nil)
	createTopic(t, c.target, testTopic, 1, fiveMB)
	createTopic(t, c.target, small, 1, map[string]string{"max.message.bytes": "65536"})
	sizes := make([]int, 201)
	for i := range sizes {
		sizes[i] = 1 << 10
	}
	sizes[100] = big
	sizedRecords(t, c.source, testTopic, sizes)
	sizedRecords(t, c.source, small, sizes[:100])
	slowTarget(c.target, 20*time.Millisecond)

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Include = []string{testTopic, small}
		cfg.Streams = 1
	}), testLogger(t))
	got := readTarget(t, c.target, testTopic, len(sizes), 2*time.Second, 60*time.Second)[0]
	gotSmall := readTarget(t, c.target, small, 100, time.Second, 30*time.Second)[0]
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if len(got) != len(sizes) || len(gotSmall) != 100 {
		t.Fatalf("target holds %d and %d records, want %d and 100", len(got), len(gotSmall), len(sizes))
	}
	for i, rec := range got {
		if _, id := recordID(t, rec); id != i {
			t.Fatalf("record %d at position %d: order broken", id, i)
		}
		if want := sizedValue(i, sizes[i]); !bytes.Equal(rec.Value, want) {
			t.Fatalf("record %d: value of %d bytes differs from the source's %d bytes", i, len(rec.Value), len(want))
		}
	}
	if batchCap := r.e.sender.limits.batchCap; batchCap != 65536-recordBatchOverhead {
		t.Fatalf("batch cap %d, want %d (the smallest target topic limit minus the batch header)", batchCap, 65536-recordBatchOverhead)
	}
	t.Logf("a %d-byte record between 1 KB records arrived intact and in order (%d records); the 64 KB topic got its 100", big, len(got))
}

// TestRecordLargerThanTargetLimitStops sends a 100 KB record to a target topic that
// accepts 64 KB: the engine stops before sending it, with an error naming the record,
// its size and the target's limit, and commits nothing past it.
func TestRecordLargerThanTargetLimitStops(t *testing.T) {
	c := newClusters(t, 1)
	createTopic(t, c.target, testTopic, 1, map[string]string{"max.message.bytes": "65536"})
	sizes := make([]int, 100)
	for i := range sizes {
		sizes[i] = 1 << 10
	}
	sizes[50] = 100 << 10
	sizedRecords(t, c.source, testTopic, sizes)

	r := startEngine(t, c.testConfig(t), testLogger(t))
	err := r.wait(t, 30*time.Second)
	if err == nil {
		t.Fatal("Run returned nil, want the error of the record too large for its target topic")
	}
	for _, want := range []string{"source record orders/0 offset 50", `target topic "orders"`, "102", "65536", "max.message.bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run error %q does not contain %q", err, want)
		}
	}
	// The records before it may still have been in flight at the stop, so the commit
	// may stop below 50; it never passes it.
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, 1)[0]
	if committed > 50 {
		t.Fatalf("committed offset %d passes the refused record at 50", committed)
	}
	got := readTarget(t, c.target, testTopic, 50, time.Second, 20*time.Second)[0]
	if len(got) != 50 {
		t.Fatalf("target holds %d records, want the 50 before the refused one", len(got))
	}
	for i, rec := range got {
		if _, id := recordID(t, rec); id != i {
			t.Fatalf("target record %d is source record %d, want the records before the refused one, in order", i, id)
		}
	}
	if s := r.e.Stats(); s.Ready {
		t.Fatal("engine reports ready after the fatal error")
	}
	t.Logf("stopped with %q; committed %d, records 0-49 on the target and nothing past them", err, committed)
}

// TestInFlightBytesStayWithinBudget mirrors 100 KB records through a slow target with a
// 4 MiB byte budget and a record limit (10000 per partition) that alone would allow
// ~2 GB in flight. The budget's high-water mark stays within the budget, the Go heap
// within the budget plus the stated overhead, and everything arrives.
func TestInFlightBytesStayWithinBudget(t *testing.T) {
	const (
		partitions   = 2
		budget       = 4 << 20
		recordSize   = 100 << 10
		perPartition = 150
		// overhead is what the budget does not cover: per assigned partition the
		// consumer's channel (kafka.ConsumerChannelBuffer records) and a fetch being fed to
		// it (up to 1 MiB); the target kfake's copy of everything mirrored (in this
		// process); twice all that for garbage not yet collected, plus 64 MiB for the
		// clients and the runtime. A sanity ceiling: the budget's own high-water mark
		// is the exact check.
		overhead = 2*(partitions*(min(kafka.ConsumerChannelBuffer, perPartition)*recordSize+2<<20)+partitions*perPartition*recordSize) + 64<<20
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.valueBytes = recordSize
	w.produce(t, c.source, perPartition)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	slowTarget(c.target, 50*time.Millisecond)

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) {
		cfg.MaxInFlightBytes = budget
		cfg.DeliveryTimeout.Duration = 30 * time.Second
	}), testLogger(t))
	var peakHeap atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peakHeap.Load() {
					peakHeap.Store(m.HeapInuse)
				}
			}
		}
	}()
	testutil.WaitFor(t, 60*time.Second, "everything committed", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == partitions && s.Partitions[0].Committed == perPartition && s.Partitions[1].Committed == perPartition
	})
	close(stopSampling)
	<-sampled
	s := r.e.Stats()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, 30*time.Second)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("%d missing, %d duplicates; want 0, 0", res.missing, res.duplicates)
	}
	if s.MaxInFlightBytes != budget {
		t.Fatalf("budget %d, want %d", s.MaxInFlightBytes, budget)
	}
	if s.InFlightBytesPeak > budget || s.InFlightBytesPeak < budget/2 {
		t.Fatalf("in-flight bytes peaked at %d, want within the budget %d and above half of it (the budget was the limit)", s.InFlightBytesPeak, budget)
	}
	if s.InFlightBytes != 0 {
		t.Fatalf("%d bytes still counted in flight after everything was acked", s.InFlightBytes)
	}
	grown := int64(peakHeap.Load()) - int64(base.HeapInuse)
	if grown > budget+overhead {
		t.Fatalf("the Go heap grew by %d bytes, over the budget %d plus the stated overhead %d", grown, budget, overhead)
	}
	t.Logf("100 KB records, budget %d: in flight peaked at %d bytes; heap in use grew by at most %d MiB (ceiling %d MiB); %d records, 0 lost, 0 duplicates",
		budget, s.InFlightBytesPeak, grown>>20, (budget+overhead)>>20, res.records)
}

// TestInFlightRecordsStayWithinProcessBound mirrors small records through a slow
// target with a per-partition bound (10,000 on each of 4 partitions) that alone would
// let 40,000 records wait in the producers: the process-wide bound holds them to
// inFlightRecordsPerProcess, the bound is reached (it was the limit), and everything
// arrives once.
func TestInFlightRecordsStayWithinProcessBound(t *testing.T) {
	const (
		partitions   = 4
		perPartition = 12_000
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, perPartition)
	// The target holds every produce request until the reader has filled the bound:
	// a delay (100 ms, then 1 s) let the producers, several requests in flight since
	// the pool, keep up with a busy machine's reader, and the bound never filled. One
	// stream, so no rebalance drain waits on a held request (it would give up and
	// the partition's records would be read twice).
	release := make(chan struct{})
	c.target.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		c.target.SleepControl(func() { <-release })
		return nil, nil, false
	})

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) {
		cfg.MaxInFlightPerPartition = 10_000
		cfg.DeliveryTimeout.Duration = time.Minute
		cfg.Streams = 1
	}), testLogger(t))
	// Hold the target back until the reader has filled the process-wide bound, then
	// let it go at full speed.
	testutil.WaitFor(t, 2*time.Minute, "the process-wide bound filled", func() bool {
		return r.e.Stats().InFlightRecordsPeak >= inFlightRecordsPerProcess*7/8
	})
	close(release)
	testutil.WaitFor(t, 2*time.Minute, "everything committed", func() bool {
		s := r.e.Stats()
		if len(s.Partitions) != partitions {
			return false
		}
		for _, p := range s.Partitions {
			if p.Committed != perPartition {
				return false
			}
		}
		return true
	})
	s := r.e.Stats()
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, time.Minute)
	res := audit(t, w, got, true, true)
	if res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("%d missing, %d duplicates; want 0, 0", res.missing, res.duplicates)
	}
	if s.MaxInFlightRecords != inFlightRecordsPerProcess {
		t.Fatalf("process-wide bound %d, want %d", s.MaxInFlightRecords, inFlightRecordsPerProcess)
	}
	if s.InFlightRecordsPeak > inFlightRecordsPerProcess {
		t.Fatalf("%d records in flight at the peak, over the process-wide bound %d", s.InFlightRecordsPeak, inFlightRecordsPerProcess)
	}
	t.Logf("%d partitions x %d per-partition bound: %d records in flight at most (process-wide bound %d); %d records, 0 lost, 0 duplicates",
		partitions, 10_000, s.InFlightRecordsPeak, inFlightRecordsPerProcess, res.records)
}

// TestFlushThresholdAloneSendsAPartlyFilledBatch is issue 30's follow-up: with
// producer.flushBytes (or flushMessages) set and no flushFrequency, sarama sends a batch
// only once it reaches the threshold, so a few records on a quiet partition (or the
// record that reserved the whole in-flight budget, which waits for the records before
// it) never left the producer, and their offsets were never committed. flushFrequency
// now defaults when either threshold is set: the records arrive, their offsets commit.
// flushMessages above 1 also stopped the engine at start: the single-record producer's
// batches of one record (Flush.MaxMessages 1) are below it, which sarama refuses.
func TestFlushThresholdAloneSendsAPartlyFilledBatch(t *testing.T) {
	tests := map[string]config.Producer{
		"flushBytes":              {FlushBytes: 1 << 20},
		"flushMessages":           {FlushMessages: 10000},
		"flushBytes and Messages": {FlushBytes: 1 << 20, FlushMessages: 10000},
	}
	for name, producer := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClusters(t, 2)
			w := newWorkload(2)
			w.produce(t, c.source, 3)
			cfg := c.testConfig(t, func(cfg *config.Config) {
				cfg.Producer = &producer
				// Longer than the test waits: a stalled batch is not flushed by the
				// engine failing on its delivery watch and closing the producer.
				cfg.DeliveryTimeout = config.Duration{Duration: 2 * time.Minute}
			})
			r := startEngine(t, cfg, testLogger(t))
			got := readTarget(t, c.target, testTopic, w.total(), 500*time.Millisecond, 20*time.Second)
			if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
				t.Fatalf("%d records missing, %d duplicates, want 0 and 0", res.missing, res.duplicates)
			}
			testutil.Eventually(t, 20*time.Second, func() error {
				committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, 2)
				for p := range int32(2) {
					if committed[p] != 3 {
						return fmt.Errorf("partition %d committed %d, want 3", p, committed[p])
					}
				}
				return nil
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
