package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Offset syncs: where source records landed on the target.
//
// From every produce ack the engine knows the target offset of a source offset. It
// writes such pairs (offset syncs) to an internal compacted topic on the target,
// OffsetSyncTopic(consumerGroup), one record per sync keyed by the source partition.
// A sync is written
//   - whenever the offset delta (target - source offset) changes: a filtered record,
//     a transaction marker or aborted records, the first record of a new assignment;
//   - otherwise after offsetSyncEveryRecords records of the partition;
//   - and every offsetSyncInterval for every partition that moved since its last sync,
//     so that a mirror that caught up has a sync at its last record.
//
// Each sync names the source offset of the sync written before it for the partition
// (Previous). When Previous equals the source offset of the sync stored before it,
// every record between the two was mirrored with the first one's delta: a source
// offset in between translates exactly (translateOffset). Otherwise the translation
// takes the safe side, the target offset right after the last sync's record, which
// never skips a record and repeats at most the records between the sync and the
// group's offset.
//
// The ack path only compares and, now and then, puts a value into a buffered channel
// without waiting; encoding and producing happen in offsetSyncWriter's goroutine. A
// full channel drops the sync and breaks the chain (the next sync has no Previous), so
// translation falls back to the safe side for that stretch instead of slowing the mirror.

const (
	offsetSyncTopicPrefix = "__kafka-mirror.offset-syncs."
	// offsetSyncEveryRecords bounds the records of a partition between two syncs when
	// the delta does not change: it bounds the duplicates of a translation that cannot
	// be exact (a lost sync, a group offset past the last sync).
	offsetSyncEveryRecords = 1000
	// offsetSyncInterval is how often the latest acked position of every partition
	// that moved is written.
	offsetSyncInterval = time.Second
	// offsetSyncQueue is the buffer between the ack path and the writer.
	offsetSyncQueue = 8192
	// offsetSyncVersion is the first byte of a sync record's value.
	offsetSyncVersion = 1
	// offsetSyncValueBytes is the encoded value: version, source, target, previous.
	offsetSyncValueBytes = 1 + 3*8
	// maxOffsetSyncsPerPartition bounds the syncs a store keeps per partition (24 KiB):
	// when it is reached, every other sync of the older half goes, so the store keeps
	// recent offsets precise and old ones translatable, coarser (see thin).
	maxOffsetSyncsPerPartition = 1024
	// offsetSyncCloseLimit bounds the last flush of the writer when the engine stops.
	offsetSyncCloseLimit = 5 * time.Second
)

var invalidTopicChars = regexp.MustCompile(`[^a-zA-Z0-9._-]`)

// OffsetSyncTopic returns the name of the compacted topic on the target cluster in
// which a mirror with source group consumerGroup records its offset syncs:
// "__kafka-mirror.offset-syncs.<consumerGroup>", characters Kafka does not allow in
// topic names replaced by '_', cut to Kafka's 249 characters. The "__" prefix keeps it
// out of every mirror's topic selection, a reverse mirror's included.
func OffsetSyncTopic(consumerGroup string) string {
	name := offsetSyncTopicPrefix + invalidTopicChars.ReplaceAllString(consumerGroup, "_")
	if len(name) > config.MaxTopicNameLength {
		name = name[:config.MaxTopicNameLength]
	}
	return name
}

// OffsetSync is one recorded pair: the source record at SourceOffset landed on the
// target at TargetOffset (same partition number, renamed topic).
type OffsetSync struct {
	SourceOffset int64
	TargetOffset int64
	// Previous is the source offset of the sync written before this one for the
	// partition when every delta change in between was written too; -1 otherwise.
	Previous int64
}

func offsetSyncKey(topic string, partition int32) []byte {
	return []byte(topic + "/" + strconv.FormatInt(int64(partition), 10))
}

func parseOffsetSyncKey(k []byte) (partitionKey, error) {
	s := string(k)
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return partitionKey{}, fmt.Errorf("offset sync key %q is not topic/partition", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return partitionKey{}, fmt.Errorf("offset sync key %q is not topic/partition: %w", s, err)
	}
	return partitionKey{s[:i], int32(p)}, nil
}

func (s OffsetSync) encode() []byte {
	b := make([]byte, offsetSyncValueBytes)
	b[0] = offsetSyncVersion
	binary.BigEndian.PutUint64(b[1:], uint64(s.SourceOffset))
	binary.BigEndian.PutUint64(b[9:], uint64(s.TargetOffset))
	binary.BigEndian.PutUint64(b[17:], uint64(s.Previous))
	return b
}

func decodeOffsetSync(b []byte) (OffsetSync, error) {
	if len(b) < offsetSyncValueBytes || b[0] != offsetSyncVersion {
		return OffsetSync{}, fmt.Errorf("offset sync value of %d bytes is not version %d", len(b), offsetSyncVersion)
	}
	return OffsetSync{
		SourceOffset: int64(binary.BigEndian.Uint64(b[1:])),
		TargetOffset: int64(binary.BigEndian.Uint64(b[9:])),
		Previous:     int64(binary.BigEndian.Uint64(b[17:])),
	}, nil
}

// partitionSyncs is a partition's state on the ack path. Its mutex is taken once per
// acked record; the batching and the single-record producers' ack readers may both
// ack the partition's records.
type partitionSyncs struct {
	mu sync.Mutex
	// tracker is the assignment whose acks are seen (once started); a new one starts
	// a new chain.
	started bool
	tracker *offsets.Tracker
	// last is the last acked record: source offset and target offset, -1 before any.
	lastSource, lastTarget int64
	// written is the source offset of the last sync handed to the writer, -1 when the
	// chain is broken (a new assignment, a dropped sync).
	written int64
	// since counts acked records since the last sync.
	since int
}

// queuedSync is a sync on its way from the ack path to the writer: a value, so that
// queueing allocates nothing.
type queuedSync struct {
	part *partitionState
	sync OffsetSync
}

// offsetSyncWriter writes offset syncs to the target (see the comment at the top).
type offsetSyncWriter struct {
	topic string
	log   logr.Logger
	queue chan queuedSync
	parts *partitionRegistry

	written, dropped, failed atomic.Int64
}

func newOffsetSyncWriter(cfg *config.Config, log logr.Logger, parts *partitionRegistry) *offsetSyncWriter {
	return &offsetSyncWriter{
		topic: OffsetSyncTopic(cfg.ConsumerGroup),
		log:   log.WithValues("offsetSyncTopic", OffsetSyncTopic(cfg.ConsumerGroup)),
		queue: make(chan queuedSync, offsetSyncQueue),
		parts: parts,
	}
}

// observe is called once per acked target record, on the ack path.
func (w *offsetSyncWriter) observe(p *partitionState, tracker *offsets.Tracker, source, target int64) {
	st := &p.syncs
	st.mu.Lock()
	if !st.started || st.tracker != tracker {
		st.started, st.tracker, st.lastSource, st.lastTarget, st.written, st.since = true, tracker, -1, -1, -1, 0
	}
	if source <= st.lastSource {
		// Acked out of order (a record sent again alone): the stretch is no longer one
		// run of the same delta.
		st.written = -1
		st.mu.Unlock()
		return
	}
	changed := st.lastSource < 0 || target-source != st.lastTarget-st.lastSource
	st.lastSource, st.lastTarget = source, target
	st.since++
	if changed || st.since >= offsetSyncEveryRecords {
		w.enqueueLocked(p, st)
	}
	st.mu.Unlock()
}

// enqueueLocked hands the partition's last acked position to the writer without
// waiting. st.mu is held.
func (w *offsetSyncWriter) enqueueLocked(p *partitionState, st *partitionSyncs) {
	select {
	case w.queue <- queuedSync{part: p, sync: OffsetSync{SourceOffset: st.lastSource, TargetOffset: st.lastTarget, Previous: st.written}}:
		st.written = st.lastSource
	default:
		st.written = -1
		w.dropped.Add(1)
	}
	st.since = 0
}

// flushPositions queues the last acked position of every partition that moved since
// its last sync.
func (w *offsetSyncWriter) flushPositions() {
	for _, p := range w.parts.all() {
		st := &p.syncs
		st.mu.Lock()
		if st.started && st.lastSource >= 0 && st.lastSource != st.written {
			w.enqueueLocked(p, st)
		}
		st.mu.Unlock()
	}
}

// run writes queued syncs through producer until stop is closed; then, unless abort
// is closed too (a killed process writes nothing more), it queues the last positions
// and writes what is queued, for at most offsetSyncCloseLimit. A failed write is
// logged and counted; it never stops the mirror.
func (w *offsetSyncWriter) run(producer sarama.AsyncProducer, stop, abort <-chan struct{}) {
	go func() {
		for pe := range producer.Errors() {
			if w.failed.Add(1) == 1 {
				w.log.Error(pe.Err, "Failed to write an offset sync to the target; translations fall back to the last sync written")
			}
		}
	}()
	tick := time.NewTicker(offsetSyncInterval)
	defer tick.Stop()
	for {
		select {
		case q := <-w.queue:
			select {
			case producer.Input() <- w.message(q):
				w.written.Add(1)
			case <-stop:
				return
			}
		case <-tick.C:
			w.flushPositions()
		case <-stop:
			select {
			case <-abort:
				return
			default:
			}
			w.flushPositions()
			limit := time.NewTimer(offsetSyncCloseLimit)
			defer limit.Stop()
			for {
				select {
				case q := <-w.queue:
					select {
					case producer.Input() <- w.message(q):
						w.written.Add(1)
					case <-limit.C:
						return
					}
				default:
					return
				}
			}
		}
	}
}

func (w *offsetSyncWriter) message(q queuedSync) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: w.topic, Partition: 0,
		Key: sarama.ByteEncoder(offsetSyncKey(q.part.topic, q.part.partition)), Value: sarama.ByteEncoder(q.sync.encode())}
}

// start creates the sync topic when missing, opens the writer's producer on its own
// client and runs the writer until stop is closed; done is closed once the writer
// returned and its client closed. A topic that cannot be created is logged and the
// writer is not started: the mirror goes on without syncs (nil channels).
func (w *offsetSyncWriter) start(cfg *config.Config, opts []kafka.Option, targetAdmin sarama.ClusterAdmin, stop, abort <-chan struct{}) (done <-chan struct{}) {
	fail := func(err error) <-chan struct{} {
		w.log.Error(err, "Failed to start writing offset syncs; group offsets cannot be translated until the mirror restarts with the topic in place")
		c := make(chan struct{})
		close(c)
		return c
	}
	if err := ensureOffsetSyncTopic(targetAdmin, w.topic); err != nil {
		return fail(err)
	}
	sc, err := offsetSyncProducerConfig(cfg, opts)
	if err != nil {
		return fail(err)
	}
	client, err := kafka.NewClientFromConfig(cfg.Target, sc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, opts...)...)
	if err != nil {
		return fail(err)
	}
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return fail(fmt.Errorf("while creating the offset sync producer: %w", err))
	}
	c := make(chan struct{})
	go func() {
		defer close(c)
		w.run(producer, stop, abort)
		// Close flushes what was handed over; the engine waits for it only until its
		// shutdown deadline.
		_ = producer.Close()
		_ = client.Close()
	}()
	w.log.Info("Started writing offset syncs to the target", "everyRecords", offsetSyncEveryRecords, "interval", offsetSyncInterval)
	return c
}

// offsetSyncProducerConfig is the sync writer's producer: acks from all replicas, one
// request at a time so syncs of a partition stay in order, partition 0.
func offsetSyncProducerConfig(cfg *config.Config, opts []kafka.Option) (*sarama.Config, error) {
	sc, err := kafka.ProducerConfig(cfg, opts...)
	if err != nil {
		return nil, err
	}
	sc.Producer.Idempotent = false
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	sc.Producer.Return.Successes = false
	sc.Producer.Return.Errors = true
	sc.ChannelBufferSize = 256
	return sc, sc.Validate()
}

// ensureOffsetSyncTopic makes sure the sync topic exists, compacted (only the latest
// sync of each partition matters) with one partition, replicated like the mirror's other
// internal topics.
func ensureOffsetSyncTopic(admin sarama.ClusterAdmin, topic string) error {
	_, err := topics.EnsureTopic(admin, topic, topics.TopicSpec{Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}})
	if err != nil {
		return fmt.Errorf("while creating offset sync topic %q on the target cluster: %w", topic, err)
	}
	return nil
}

// offsetSyncStore holds the syncs read from the sync topic, per source partition,
// sorted by source offset.
type offsetSyncStore struct {
	topic string
	next  int64 // the next offset of the sync topic to read
	syncs map[partitionKey][]OffsetSync
}

func newOffsetSyncStore(topic string) *offsetSyncStore {
	return &offsetSyncStore{topic: topic, syncs: map[partitionKey][]OffsetSync{}}
}

// add stores s. A sync at or below the newest one stored (the partition mirrored
// again after a restart, or by a new owner) replaces every stored sync at or above
// it: the records it describes were written again, later, and the later copies are
// the ones to resume from.
func (st *offsetSyncStore) add(tp partitionKey, s OffsetSync) {
	list := st.syncs[tp]
	for len(list) > 0 && list[len(list)-1].SourceOffset >= s.SourceOffset {
		list = list[:len(list)-1]
	}
	if len(list) >= maxOffsetSyncsPerPartition {
		list = thin(list)
	}
	st.syncs[tp] = append(list, s)
}

// thin drops every other sync of the older half of list, in place. The syncs left
// there no longer follow each other (their Previous no longer matches), so offsets
// between them translate to the safe side: never skipping, repeating at most the
// records between two kept syncs. Repeated thinning spaces old syncs further and
// further apart, as MirrorMaker 2's offset sync store does.
func thin(list []OffsetSync) []OffsetSync {
	half := len(list) / 2
	n := 0
	for i := 0; i < half; i += 2 {
		list[n] = list[i]
		n++
	}
	n += copy(list[n:], list[half:])
	return list[:n]
}

// translateOffset returns the target offset from which a consumer reads every record
// at or after source offset committed (a group's committed offset: the next record to
// read), and whether it is exact (no record before committed read again). ok is false
// when no sync at or below committed is known.
func translateOffset(syncs []OffsetSync, committed int64) (target int64, exact, ok bool) {
	// i is the first sync above committed; i-1 the latest at or below it.
	lo, hi := 0, len(syncs)
	for lo < hi {
		m := (lo + hi) / 2
		if syncs[m].SourceOffset <= committed {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false, false
	}
	s1 := syncs[lo-1]
	if s1.SourceOffset == committed {
		return s1.TargetOffset, true, true
	}
	if lo < len(syncs) && syncs[lo].Previous == s1.SourceOffset {
		// Every record in (s1, s2) was mirrored with s1's delta, contiguously, up to
		// the last one before a gap; the first record at or after committed is at
		// committed + delta or, past the gap, at s2's target offset.
		s2 := syncs[lo]
		return min(committed+s1.TargetOffset-s1.SourceOffset, s2.TargetOffset), true, true
	}
	// Everything mirrored after s1 is after s1's target record.
	return s1.TargetOffset + 1, false, true
}

// readOffsetSyncs reads the sync topic from st.next up to its end as of the call.
func readOffsetSyncs(ctx context.Context, client sarama.Client, st *offsetSyncStore, log logr.Logger) error {
	end, err := client.GetOffset(st.topic, 0, sarama.OffsetNewest)
	if err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil
		}
		return fmt.Errorf("while reading the end of offset sync topic %q: %w", st.topic, err)
	}
	if st.next >= end {
		return nil
	}
	start, err := client.GetOffset(st.topic, 0, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("while reading the start of offset sync topic %q: %w", st.topic, err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(st.topic, 0, max(st.next, start))
	if err != nil {
		return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, err)
	}
	defer pc.AsyncClose()
	for {
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				return fmt.Errorf("while reading offset sync topic %q: the consumer closed", st.topic)
			}
			st.next = m.Offset + 1
			tp, kerr := parseOffsetSyncKey(m.Key)
			s, verr := decodeOffsetSync(m.Value)
			if err := errors.Join(kerr, verr); err != nil {
				log.V(1).Info("Ignored a record of the offset sync topic", "offset", m.Offset, "reason", err.Error())
			} else {
				st.add(tp, s)
			}
			if st.next >= end {
				return nil
			}
		case cerr := <-pc.Errors():
			return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, cerr)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
