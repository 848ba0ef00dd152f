package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names of the benchmark's records. Every record carries two headers, as the
// issue asks; the latency probe adds a third with the send time.
const (
	headerSeq    = "bench-seq"
	headerOrigin = "bench-origin"
	headerSent   = "bench-sent"
	originValue  = "kafka-mirror-bench"
)

// keySpace is the number of distinct keys; keys repeat, as in most real topics.
const keySpace = 100_000

// recordGen makes the benchmark's records. Values are slices of one random buffer, so
// generating a record costs no copy of its value and the generator does not skew the
// measurement of what reads or writes them. The bytes are random so that they are
// incompressible, should anything on the path compress.
type recordGen struct {
	valueSize int
	values    []byte
	keys      [][]byte
	origin    []byte
}

const valueBufferSize = 1 << 16

func newRecordGen(valueSize int) *recordGen {
	rnd := rand.New(rand.NewSource(1))
	g := &recordGen{valueSize: valueSize, values: make([]byte, valueBufferSize+valueSize), origin: []byte(originValue)}
	rnd.Read(g.values)
	g.keys = make([][]byte, keySpace)
	for i := range g.keys {
		g.keys[i] = fmt.Appendf(nil, "key-%06d", i)
	}
	return g
}

func (g *recordGen) key(i int) []byte { return g.keys[i%keySpace] }

func (g *recordGen) value(i int) []byte {
	off := (i * 131) % valueBufferSize
	return g.values[off : off+g.valueSize]
}

func seqBytes(i int) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(i))
}

// kgoRecord is record i of a partitioned workload as a franz-go record.
func (g *recordGen) kgoRecord(topic string, partitions int32, i int) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: int32(i % int(partitions)),
		Key:       g.key(i),
		Value:     g.value(i),
		Headers: []kgo.RecordHeader{
			{Key: headerSeq, Value: seqBytes(i)},
			{Key: headerOrigin, Value: g.origin},
		},
	}
}

// saramaMessage is record i as a sarama producer message, the same record kgoRecord
// writes, so that the raw produce limit writes what the engine writes.
func (g *recordGen) saramaMessage(topic string, partitions int32, i int) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{
		Topic:     topic,
		Partition: int32(i % int(partitions)),
		Key:       sarama.ByteEncoder(g.key(i)),
		Value:     sarama.ByteEncoder(g.value(i)),
		Headers: []sarama.RecordHeader{
			{Key: []byte(headerSeq), Value: seqBytes(i)},
			{Key: []byte(headerOrigin), Value: g.origin},
		},
	}
}

// recordBytes is the key and value size of record i, what the engine counts as bytes.
func (g *recordGen) recordBytes(i int) int { return len(g.key(i)) + g.valueSize }

// preload writes records [from, from+n) to topic on the cluster at brokers as fast as
// the cluster takes them, uncompressed (so the engine reads what it writes), and returns
// how long it took.
func preload(ctx context.Context, brokers []string, g *recordGen, topic string, partitions int32, from, n int) (time.Duration, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(1<<16),
		kgo.RecordDeliveryTimeout(time.Minute),
	)
	if err != nil {
		return 0, fmt.Errorf("while creating the preload producer: %w", err)
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for i := from; i < from+n; i++ {
		cl.Produce(ctx, g.kgoRecord(topic, partitions, i), func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("while flushing the preload of %s: %w", topic, err)
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return 0, fmt.Errorf("while preloading %s: %w", topic, firstErr)
	}
	return elapsed, nil
}
