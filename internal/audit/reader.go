package audit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MirroredRecord is one record read from the target.
type MirroredRecord struct {
	// Topic, Partition and Offset locate the record on the target.
	Topic     string
	Partition int32
	Offset    int64
	// ID is the value of the HeaderID header; empty when the record has none.
	ID string
	// Digest is the record's Digest.
	Digest uint64
}

// Mirrored is everything read from the target topics, every copy included.
type Mirrored struct {
	// Records holds the records in target offset order within each partition.
	Records []MirroredRecord
	// Ends maps topic and partition to the end offset read up to.
	Ends map[string]map[int32]int64
}

// ReadOptions bounds ReadAll.
type ReadOptions struct {
	// MinRecords makes ReadAll keep reading, as new records arrive, until it holds at
	// least this many records (copies included). 0 reads up to the end offsets seen at
	// the start.
	MinRecords int
	// Timeout bounds the whole read. Default 2 minutes.
	Timeout time.Duration
	// ReadCommitted reads with isolation level read_committed.
	ReadCommitted bool
}

// ReadAll reads every record of topics on the cluster at brokers, from the start up to
// the end offsets current when it is called, or longer as ReadOptions says. Topics that do
// not exist yet are read as empty.
func ReadAll(ctx context.Context, brokers []string, topics []string, opts ReadOptions) (*Mirrored, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r := NewReader(brokers, topics)
	r.ReadCommitted = opts.ReadCommitted
	for {
		if err := r.Poll(ctx); err != nil {
			return r.Mirrored(), err
		}
		if len(r.m.Records) >= opts.MinRecords {
			return r.Mirrored(), nil
		}
		select {
		case <-ctx.Done():
			return r.Mirrored(), fmt.Errorf("while waiting for %d records on the target (read %d): %w", opts.MinRecords, len(r.m.Records), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ReadUntilComplete polls the target until every record of p that the filter keeps is
// there (Audit reports nothing lost), or ctx ends. It returns what it read and the last
// report either way; the error says whether the target became complete.
func ReadUntilComplete(ctx context.Context, brokers []string, p *Produced, opts Options) (*Mirrored, Report, error) {
	r := NewReader(brokers, targetTopics(p, opts))
	for {
		err := r.Poll(ctx)
		m := r.Mirrored()
		rep := Audit(p, m, opts)
		if err == nil && rep.Total.Lost == 0 {
			return m, rep, nil
		}
		// A transient answer (OFFSET_NOT_AVAILABLE while a restarted cluster elects
		// leaders, NOT_LEADER_OR_FOLLOWER, ...) is asked again until ctx ends.
		if err != nil && kerr.IsRetriable(err) && ctx.Err() == nil {
			err = nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return m, rep, fmt.Errorf("while waiting for the target to hold every record (%d missing): %w", rep.Total.Lost, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// targetTopics lists the target topics the produced topics map to.
func targetTopics(p *Produced, opts Options) []string {
	var ts []string
	for _, t := range p.Topics() {
		ts = append(ts, opts.targetTopic(t))
	}
	return ts
}

// Reader reads target topics incrementally: each Poll reads what arrived since the last.
type Reader struct {
	// ReadCommitted reads with isolation level read_committed: records of aborted or
	// open transactions are not read.
	ReadCommitted bool

	brokers []string
	topics  []string
	next    map[string]map[int32]int64
	m       Mirrored
}

// NewReader returns a Reader of topics on the cluster at brokers, positioned at the start.
func NewReader(brokers []string, topics []string) *Reader {
	return &Reader{
		brokers: brokers,
		topics:  topics,
		next:    map[string]map[int32]int64{},
		m:       Mirrored{Ends: map[string]map[int32]int64{}},
	}
}

// Mirrored returns what the reader has read so far. The caller must not modify it.
func (r *Reader) Mirrored() *Mirrored {
	m := r.m
	return &m
}

// Poll reads every partition of the reader's topics up to its end offset at the time of
// the call.
func (r *Reader) Poll(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...))
	if err != nil {
		return fmt.Errorf("while creating the target reader: %w", err)
	}
	ends, err := endOffsets(ctx, cl, r.topics, r.ReadCommitted)
	cl.Close()
	if err != nil {
		return err
	}
	todo := map[string]map[int32]kgo.Offset{}
	for t, ps := range ends {
		if r.next[t] == nil {
			r.next[t] = map[int32]int64{}
			r.m.Ends[t] = map[int32]int64{}
		}
		for p, end := range ps {
			r.m.Ends[t][p] = end
			if r.next[t][p] >= end {
				continue
			}
			if todo[t] == nil {
				todo[t] = map[int32]kgo.Offset{}
			}
			todo[t][p] = kgo.NewOffset().At(r.next[t][p])
		}
	}
	if len(todo) == 0 {
		return nil
	}
	return r.fetch(ctx, todo, ends)
}

// fetch consumes the partitions in todo until each reached its end offset. Control
// records (transaction markers) are read too, though not kept, so that a partition whose
// last offsets are markers, or aborted records followed by their marker, still reaches
// its end.
func (r *Reader) fetch(ctx context.Context, todo map[string]map[int32]kgo.Offset, ends map[string]map[int32]int64) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.brokers...),
		kgo.ConsumePartitions(todo),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.KeepControlRecords(),
	}
	if r.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("while creating the target reader: %w", err)
	}
	defer cl.Close()
	remaining := 0
	for _, ps := range todo {
		remaining += len(ps)
	}
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("while reading the target (%d partitions not read to the end): %w", remaining, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("while reading %s/%d from the target: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachRecord(func(rec *kgo.Record) {
			end := ends[rec.Topic][rec.Partition]
			if rec.Offset >= end || rec.Offset < r.next[rec.Topic][rec.Partition] {
				return
			}
			if !rec.Attrs.IsControl() {
				r.m.Records = append(r.m.Records, MirroredRecord{
					Topic:     rec.Topic,
					Partition: rec.Partition,
					Offset:    rec.Offset,
					ID:        headerValue(rec, HeaderID),
					Digest:    Digest(rec),
				})
			}
			r.next[rec.Topic][rec.Partition] = rec.Offset + 1
			if rec.Offset+1 == end {
				remaining--
			}
		})
	}
	return nil
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// endOffsets returns the partitions of each existing topic with their end offsets.
func endOffsets(ctx context.Context, cl *kgo.Client, topics []string, committed bool) (map[string]map[int32]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("while reading target metadata: %w", err)
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.ReplicaID = -1
	if committed {
		lreq.IsolationLevel = 1
	}
	for _, mt := range mresp.Topics {
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue
			}
			return nil, fmt.Errorf("while reading metadata of topic %q: %w", *mt.Topic, err)
		}
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = *mt.Topic
		for _, mp := range mt.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = mp.Partition
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		lreq.Topics = append(lreq.Topics, lt)
	}
	ends := map[string]map[int32]int64{}
	if len(lreq.Topics) == 0 {
		return ends, nil
	}
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("while listing target end offsets: %w", err)
	}
	var bad []string
	var first error
	for _, lt := range lresp.Topics {
		ends[lt.Topic] = map[int32]int64{}
		for _, lp := range lt.Partitions {
			if err := kerr.ErrorForCode(lp.ErrorCode); err != nil {
				bad = append(bad, fmt.Sprintf("%s/%d: %v", lt.Topic, lp.Partition, err))
				if first == nil {
					first = err
				}
				continue
			}
			ends[lt.Topic][lp.Partition] = lp.Offset
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		// The first partition's error is wrapped, so a caller can tell a transient
		// answer (kerr.IsRetriable) from a final one.
		return nil, fmt.Errorf("while listing target end offsets: %s: %w", strings.Join(bad, "; "), first)
	}
	return ends, nil
}
