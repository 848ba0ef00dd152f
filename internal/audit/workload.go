package audit

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names the workload writes on every record.
const (
	// HeaderID carries the record's unique id, "<topic>/<partition>/<run>.<seq>".
	HeaderID = "km-id"
	// HeaderSkip is present on the fraction of records a filter is expected to drop.
	HeaderSkip = "skip"
	// HeaderOrigin marks records written by this package, so that a third header with a
	// fixed value travels through the mirror.
	HeaderOrigin = "km-origin"
)

// Workload describes the records Produce writes.
type Workload struct {
	// Topics maps each source topic to its partition count. The topics must exist.
	Topics map[string]int32
	// Records is the total number of records, spread evenly over every partition.
	Records int
	// Rate is the number of records per second over all partitions; 0 means as fast
	// as the source takes them.
	Rate int
	// ValueSize is the size of each non-null value in bytes. Default 100.
	ValueSize int
	// NullFraction is the fraction of records written with a null value (tombstones).
	NullFraction float64
	// SkipFraction is the fraction of records carrying the HeaderSkip header.
	SkipFraction float64
	// Keys is the number of distinct keys. Default 1000.
	Keys int
	// Seed makes the choice of keys, null values and skip headers repeatable.
	Seed int64
	// Run distinguishes the ids of separate Produce calls into the same partitions.
	// Default "r<Seed>"; two calls into the same topics need different Runs.
	Run string
	// TransactionSize, when positive, writes the records in transactions of this many
	// records through a transactional producer.
	TransactionSize int
	// AbortFraction is the fraction of transactions aborted instead of committed.
	AbortFraction float64
}

// ProducedRecord is one record the source acknowledged.
type ProducedRecord struct {
	// Topic and Partition are where the record was written on the source.
	Topic     string
	Partition int32
	// Offset is the source offset the record was acknowledged at.
	Offset int64
	// ID is the value of the HeaderID header.
	ID string
	// Skip reports whether the record carries the HeaderSkip header.
	Skip bool
	// Null reports whether the value is null (a tombstone).
	Null bool
	// Digest is a hash of key, value, headers and timestamp, to detect alteration.
	Digest uint64
}

// Produced is everything one or more Produce calls got acknowledged by the source.
type Produced struct {
	// Records holds every acknowledged record, sorted by topic, partition and offset.
	Records []ProducedRecord
	// Partitions maps each topic written to its partition count.
	Partitions map[string]int32
	// Failed counts records the source did not acknowledge (they are not in Records).
	Failed int
	// FirstError is the first produce error seen, if any.
	FirstError error
	// Aborted holds the ids of records written in aborted transactions.
	Aborted []string
	// Elapsed is the wall time Produce took.
	Elapsed time.Duration
}

// Topics returns the topics written, sorted.
func (p *Produced) Topics() []string {
	ts := make([]string, 0, len(p.Partitions))
	for t := range p.Partitions {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// Merge adds the records of another Produce call, so that one Audit covers a workload
// written in phases (for example before and after a partition expansion).
func (p *Produced) Merge(o *Produced) {
	p.Records = append(p.Records, o.Records...)
	sortProduced(p.Records)
	if p.Partitions == nil {
		p.Partitions = map[string]int32{}
	}
	for t, n := range o.Partitions {
		p.Partitions[t] = max(p.Partitions[t], n)
	}
	p.Failed += o.Failed
	if p.FirstError == nil {
		p.FirstError = o.FirstError
	}
	p.Aborted = append(p.Aborted, o.Aborted...)
	p.Elapsed += o.Elapsed
}

func sortProduced(rs []ProducedRecord) {
	slices.SortFunc(rs, func(a, b ProducedRecord) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
}

// Produce writes the workload to the source cluster at brokers and returns every record
// the source acknowledged. Records the source refused are counted in Failed, never
// returned, so that a lost produce is not blamed on the mirror. progress, if not nil, is
// called every 1000 records with the number of records handed to the producer so far.
// The error is non-nil only when the workload could not be written at all or ctx ended.
func Produce(ctx context.Context, brokers []string, w Workload, progress func(n int)) (*Produced, error) {
	if len(w.Topics) == 0 || w.Records <= 0 {
		return nil, errors.New("while producing the workload: no topics or no records")
	}
	w.defaults()
	tps := w.partitions()
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordDeliveryTimeout(2 * time.Minute),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if w.TransactionSize > 0 {
		opts = append(opts, kgo.TransactionalID("km-audit-"+w.Run))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("while creating the workload producer: %w", err)
	}
	defer cl.Close()

	p := &producer{w: w, cl: cl, out: &Produced{Partitions: map[string]int32{}}}
	for t, n := range w.Topics {
		p.out.Partitions[t] = n
	}
	start := time.Now()
	err = p.run(ctx, tps, start, progress)
	p.out.Elapsed = time.Since(start)
	sortProduced(p.out.Records)
	if err != nil {
		return p.out, err
	}
	return p.out, nil
}

func (w *Workload) defaults() {
	if w.ValueSize <= 0 {
		w.ValueSize = 100
	}
	if w.Keys <= 0 {
		w.Keys = 1000
	}
	if w.Run == "" {
		w.Run = "r" + strconv.FormatInt(w.Seed, 10)
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// partitions lists every topic partition in a fixed order, so a seed gives one workload.
func (w *Workload) partitions() []topicPartition {
	var tps []topicPartition
	for _, t := range sortedKeys(w.Topics) {
		for p := int32(0); p < w.Topics[t]; p++ {
			tps = append(tps, topicPartition{t, p})
		}
	}
	return tps
}

func sortedKeys(m map[string]int32) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

type producer struct {
	w   Workload
	cl  *kgo.Client
	mu  sync.Mutex
	out *Produced
	txn []ProducedRecord // acked records of the open transaction
}

func (p *producer) run(ctx context.Context, tps []topicPartition, start time.Time, progress func(int)) error {
	rnd := rand.New(rand.NewSource(p.w.Seed))
	seq := make([]int, len(tps))
	txnOpen := false
	for i := 0; i < p.w.Records; i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("while producing the workload: %w", err)
		}
		if p.w.TransactionSize > 0 && !txnOpen {
			if err := p.cl.BeginTransaction(); err != nil {
				return fmt.Errorf("while beginning a workload transaction: %w", err)
			}
			txnOpen = true
		}
		p.pace(i, start)
		k := i % len(tps)
		r, pr := p.w.record(rnd, tps[k], seq[k])
		seq[k]++
		p.cl.Produce(ctx, r, func(r *kgo.Record, err error) { p.acked(r, pr, err) })
		if progress != nil && (i+1)%1000 == 0 {
			progress(i + 1)
		}
		if txnOpen && ((i+1)%p.w.TransactionSize == 0 || i+1 == p.w.Records) {
			if err := p.endTransaction(ctx, rnd.Float64() >= p.w.AbortFraction); err != nil {
				return err
			}
			txnOpen = false
		}
	}
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("while flushing the workload: %w", err)
	}
	if progress != nil {
		progress(p.w.Records)
	}
	return nil
}

// pace sleeps until record i is due at the workload's rate.
func (p *producer) pace(i int, start time.Time) {
	if p.w.Rate <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(i) / float64(p.w.Rate) * float64(time.Second)))
	if d := time.Until(due); d > time.Millisecond {
		time.Sleep(d)
	}
}

// endTransaction flushes and commits or aborts; only a committed transaction's records
// count as produced.
func (p *producer) endTransaction(ctx context.Context, commit bool) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("while flushing a workload transaction: %w", err)
	}
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	err := p.cl.EndTransaction(ctx, try)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || !commit {
		for _, r := range p.txn {
			p.out.Aborted = append(p.out.Aborted, r.ID)
		}
	} else {
		p.out.Records = append(p.out.Records, p.txn...)
	}
	p.txn = p.txn[:0]
	if err != nil {
		return fmt.Errorf("while ending a workload transaction: %w", err)
	}
	return nil
}

func (p *producer) acked(r *kgo.Record, pr ProducedRecord, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.out.Failed++
		if p.out.FirstError == nil {
			p.out.FirstError = fmt.Errorf("while producing %s: %w", pr.ID, err)
		}
		return
	}
	pr.Offset = r.Offset
	pr.Digest = Digest(r)
	if p.w.TransactionSize > 0 {
		p.txn = append(p.txn, pr)
		return
	}
	p.out.Records = append(p.out.Records, pr)
}

// record builds the seq-th record of one partition.
func (w *Workload) record(rnd *rand.Rand, tp topicPartition, seq int) (*kgo.Record, ProducedRecord) {
	id := tp.topic + "/" + strconv.Itoa(int(tp.partition)) + "/" + w.Run + "." + strconv.Itoa(seq)
	pr := ProducedRecord{Topic: tp.topic, Partition: tp.partition, ID: id}
	r := &kgo.Record{
		Topic:     tp.topic,
		Partition: tp.partition,
		Key:       []byte("key-" + strconv.Itoa(rnd.Intn(w.Keys))),
		Headers: []kgo.RecordHeader{
			{Key: HeaderID, Value: []byte(id)},
			{Key: HeaderOrigin, Value: []byte("kafka-mirror-audit")},
		},
		// Millisecond precision: that is what Kafka stores, so the digest of the record
		// sent equals the digest of the record read back.
		Timestamp: time.UnixMilli(time.Now().UnixMilli()),
	}
	if rnd.Float64() < w.SkipFraction {
		pr.Skip = true
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderSkip, Value: []byte("1")})
	}
	if rnd.Float64() < w.NullFraction {
		pr.Null = true
		return r, pr
	}
	v := make([]byte, max(w.ValueSize, len(id)+1))
	n := copy(v, id)
	v[n] = '|'
	for i := n + 1; i < len(v); i++ {
		v[i] = byte('a' + rnd.Intn(26))
	}
	r.Value = v
	return r, pr
}

// Digest hashes what a mirror must keep unchanged: key, value (telling null from
// empty), headers in order and the timestamp in milliseconds.
func Digest(r *kgo.Record) uint64 {
	h := fnv.New64a()
	var n [8]byte
	writeBytes := func(b []byte) {
		if b == nil {
			binary.BigEndian.PutUint64(n[:], ^uint64(0))
			h.Write(n[:])
			return
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	writeBytes(r.Key)
	writeBytes(r.Value)
	for _, hd := range r.Headers {
		writeBytes([]byte(hd.Key))
		writeBytes(hd.Value)
	}
	binary.BigEndian.PutUint64(n[:], uint64(r.Timestamp.UnixMilli()))
	h.Write(n[:])
	return h.Sum64()
}
