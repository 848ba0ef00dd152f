package mirror

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// producerIDs records, per target topic and partition, the producer IDs of the record
// batches the target was sent, and answers every produce request after delay, so that
// records pile up in the producers while their requests are in flight.
type producerIDs struct {
	mu  sync.Mutex
	ids map[string]map[int32]map[int64]bool
}

// recordBatchProducerID is where a record batch (magic 2) holds its producer ID:
// baseOffset (8), batchLength (4), partitionLeaderEpoch (4), magic (1), crc (4),
// attributes (2), lastOffsetDelta (4), firstTimestamp (8), maxTimestamp (8).
const recordBatchProducerID = 43

func watchProducerIDs(cl *kfake.Cluster, delay time.Duration) *producerIDs {
	w := &producerIDs{ids: map[string]map[int32]map[int64]bool{}}
	cl.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		w.mu.Lock()
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			if w.ids[t.Topic] == nil {
				w.ids[t.Topic] = map[int32]map[int64]bool{}
			}
			for _, p := range t.Partitions {
				if len(p.Records) < recordBatchProducerID+8 {
					continue
				}
				if w.ids[t.Topic][p.Partition] == nil {
					w.ids[t.Topic][p.Partition] = map[int64]bool{}
				}
				w.ids[t.Topic][p.Partition][int64(binary.BigEndian.Uint64(p.Records[recordBatchProducerID:]))] = true
			}
		}
		w.mu.Unlock()
		cl.SleepControl(func() { time.Sleep(delay) })
		return nil, nil, false
	})
	return w
}

// TestProducerPoolKeepsOrderPerPartition mirrors 8 partitions through 4 batching
// producers to a target that answers in 20 ms, with every 25th record too large for a
// batch (a second mirrored topic caps batches at 64 KB), so each partition's records
// switch between its batching producer and the single-record one again and again.
// Every record arrives once and in its partition's order; each target partition was
// written by one batching producer (and the single-record one), and the partitions
// were spread over all four.
func TestProducerPoolKeepsOrderPerPartition(t *testing.T) {
	const (
		partitions   = 8
		perPartition = 400
		producers    = 4
		small        = "small"
		bigEvery     = 25
	)
	c := newClusters(t, partitions)
	oneMB := map[string]string{"max.message.bytes": strconv.Itoa(1 << 20)}
	alterTopic(t, c.source, testTopic, oneMB)
	createTopic(t, c.source, small, 1, nil)
	createTopic(t, c.target, testTopic, partitions, oneMB)
	createTopic(t, c.target, small, 1, map[string]string{"max.message.bytes": "65536"})
	sizes := make([]int, perPartition)
	for i := range sizes {
		sizes[i] = 1 << 10
		if i%bigEvery == bigEvery/2 {
			sizes[i] = 100 << 10
		}
	}
	produceSized(t, c.source, testTopic, partitions, sizes)
	ids := watchProducerIDs(c.target, 20*time.Millisecond)

	r := startEngine(t, c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Include = []string{testTopic, small}
		cfg.Producer = &config.Producer{Producers: producers}
	}), testLogger(t))
	got := readTarget(t, c.target, testTopic, partitions*perPartition, 2*time.Second, 120*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if n := len(r.e.sender.producers); n != producers {
		t.Fatalf("%d batching producers, want %d", n, producers)
	}
	for p := int32(0); p < partitions; p++ {
		if len(got[p]) != perPartition {
			t.Fatalf("target partition %d holds %d records, want %d, once each", p, len(got[p]), perPartition)
		}
		for i, rec := range got[p] {
			if sp, id := recordID(t, rec); sp != p || id != i {
				t.Fatalf("target partition %d, position %d: record %d/%d, want %d/%d (order broken or misplaced)", p, i, sp, id, p, i)
			}
			if len(rec.Value) != sizes[i] {
				t.Fatalf("record %d/%d: value of %d bytes, want %d", p, i, len(rec.Value), sizes[i])
			}
		}
	}
	if s := r.e.Stats(); s.SendErrors != 0 {
		t.Fatalf("%d send errors, want 0", s.SendErrors)
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	all := map[int64]bool{}
	for p, seen := range ids.ids[testTopic] {
		// The partition's batching producer and the single-record one.
		if len(seen) != 2 {
			t.Errorf("target partition %d was written by %d producers (%v), want 2: its batching producer and the single-record one", p, len(seen), seen)
		}
		for id := range seen {
			all[id] = true
		}
	}
	if len(all) != producers+1 {
		t.Fatalf("the topic was written by %d producers, want %d (every batching producer and the single-record one)", len(all), producers+1)
	}
	t.Logf("%d records in %d partitions through %d batching producers and the single-record one: in order, once each", partitions*perPartition, partitions, producers)
}

// produceSized writes, in order, one record per size to every partition of topic,
// each with an "id" header "<partition>/<index>" and a value of that many bytes.
func produceSized(t *testing.T, cl *kfake.Cluster, topic string, partitions int32, sizes []int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var recs []*kgo.Record
	for p := range partitions {
		for i, n := range sizes {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: sizedValue(i, n),
				Headers: []kgo.RecordHeader{{Key: "id", Value: fmt.Appendf(nil, "%d/%d", p, i)}}})
		}
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
