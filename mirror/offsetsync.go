package mirror

import (
	"encoding/binary"
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
// in its chain (Previous, see below). When Previous equals the source offset of the
// chain's sync stored before it,
// every record between the two was mirrored with the first one's delta: a source
// offset in between translates exactly. Otherwise the translation takes the safe side.
//
// Each sync also names the source topic's ID (its incarnation, incarnation.go) that the
// chain's assignment read: a topic deleted and created again under the same name starts
// its offsets at 0 again, and translation uses only the syncs of the topic's current ID
// (offsetsyncstore.go), never the old topic's.
//
// Each sync also names its chain: the assignment of the partition (one claim in one
// process) whose copies it describes, by the source and target offsets of the first
// record that assignment landed. Two assignments can write the same partition at once
// (a drain that gave up leaves records in flight that land after the next owner's), so
// the syncs of one are never read as following those of the other; once an assignment
// ended and its last record was acked, a sync with End set says that no copy of the
// chain follows. How the chains are combined into one translation that never skips a
// record is in offsetsyncstore.go.
//
// The ack path only compares and, now and then, puts a value into a buffered channel
// without waiting; encoding and producing happen in offsetSyncWriter's goroutine. A
// full channel drops the sync and breaks the chain's links (the next sync has no
// Previous), so translation falls back to the safe side for that stretch instead of
// slowing the mirror.

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
	offsetSyncVersion = 2
	// offsetSyncValueBytes is the encoded value: version, source, target, previous,
	// the chain's source and target, flags; then the source topic's ID, when known, as
	// the rest of the value (a version 2 reader that predates it ignores those bytes,
	// so an engine of the previous release still reads the syncs of a newer one).
	offsetSyncValueBytes = 1 + 5*8 + 1
	// offsetSyncV1Bytes is a version 1 value (source, target, previous, no chain),
	// written before chains: still read, as one chain of unknown start.
	offsetSyncV1Bytes = 1 + 3*8
	// offsetSyncFlagEnd marks the last sync of a chain (OffsetSync.End).
	offsetSyncFlagEnd = 1
	// maxOffsetSyncsPerPartition bounds the syncs a store keeps per partition, all
	// chains together (48 KiB): when it is reached, every other sync of the older half
	// of the longest chain goes, so the store keeps recent offsets precise and old ones
	// translatable, coarser (see thin), except the syncs around the groups' committed
	// offsets (offsetSyncStore.pinGroup); when no chain is long enough to thin, the
	// oldest chain goes (see drop).
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
	// partition in the same chain when every delta change in between was written too;
	// -1 otherwise.
	Previous int64
	// ChainSource and ChainTarget name the chain: the source and target offsets of the
	// first record its assignment landed (a target offset holds one record, so no two
	// chains of a partition share it). -1 and -1 in a version 1 sync.
	ChainSource, ChainTarget int64
	// End reports that the chain's assignment ended and its last record was acked:
	// no copy of the chain follows this one.
	End bool
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

// encode encodes s as a sync record's value, naming topicID ("" when unknown).
func (s OffsetSync) encode(topicID string) []byte {
	b := make([]byte, offsetSyncValueBytes, offsetSyncValueBytes+len(topicID))
	b[0] = offsetSyncVersion
	binary.BigEndian.PutUint64(b[1:], uint64(s.SourceOffset))
	binary.BigEndian.PutUint64(b[9:], uint64(s.TargetOffset))
	binary.BigEndian.PutUint64(b[17:], uint64(s.Previous))
	binary.BigEndian.PutUint64(b[25:], uint64(s.ChainSource))
	binary.BigEndian.PutUint64(b[33:], uint64(s.ChainTarget))
	if s.End {
		b[41] = offsetSyncFlagEnd
	}
	return append(b, topicID...)
}

// decodeOffsetSync decodes a sync record's value and the source topic ID it names (""
// for none: a version 1 value, or an engine that did not know the ID).
func decodeOffsetSync(b []byte) (OffsetSync, string, error) {
	switch {
	case len(b) >= offsetSyncValueBytes && b[0] == offsetSyncVersion:
	case len(b) >= offsetSyncV1Bytes && b[0] == 1:
		return OffsetSync{
			SourceOffset: int64(binary.BigEndian.Uint64(b[1:])),
			TargetOffset: int64(binary.BigEndian.Uint64(b[9:])),
			Previous:     int64(binary.BigEndian.Uint64(b[17:])),
			ChainSource:  -1,
			ChainTarget:  -1,
		}, "", nil
	default:
		return OffsetSync{}, "", fmt.Errorf("offset sync value of %d bytes is neither version 1 nor version %d", len(b), offsetSyncVersion)
	}
	return OffsetSync{
		SourceOffset: int64(binary.BigEndian.Uint64(b[1:])),
		TargetOffset: int64(binary.BigEndian.Uint64(b[9:])),
		Previous:     int64(binary.BigEndian.Uint64(b[17:])),
		ChainSource:  int64(binary.BigEndian.Uint64(b[25:])),
		ChainTarget:  int64(binary.BigEndian.Uint64(b[33:])),
		End:          b[41]&offsetSyncFlagEnd != 0,
	}, string(b[offsetSyncValueBytes:]), nil
}

// partitionSyncs is a partition's state on the ack path. Its mutex is taken once per
// acked record; the batching and the single-record producers' ack readers may both
// ack the partition's records.
type partitionSyncs struct {
	mu sync.Mutex
	// cur is the chain of the partition's latest assignment in this process; prev the
	// one before, whose records may still be acked after its drain gave up (also when
	// the partition came back meanwhile). An ack of an older assignment is not synced.
	cur, prev chainSyncs
}

// chainSyncs is the state of one chain (one assignment's acks) on the ack path.
type chainSyncs struct {
	// live is set once the chain follows an assignment: tracker's acks.
	live    bool
	tracker *offsets.Tracker
	// topicID is the source topic's ID the assignment read ("" when unknown): every
	// sync of the chain names it.
	topicID string
	// start is the chain's first acked record, source and target offset; last the
	// last one acked (-1 before any).
	startSource, startTarget int64
	lastSource, lastTarget   int64
	// written is the source offset of the last sync handed to the writer, -1 when the
	// links are broken (a new chain, a dropped sync); writtenPrevious is that sync's
	// Previous.
	written, writtenPrevious int64
	// since counts acked records since the last sync.
	since int
	// ended is set when the assignment ended (no record is added to the tracker any
	// more); once the tracker holds no record but its neverSent ones, the chain's
	// last sync is written with End (endWritten).
	ended      bool
	neverSent  int
	endWritten bool
}

// startChain readies c for tracker's acks of topic ID topicID.
func (c *chainSyncs) startChain(tracker *offsets.Tracker, topicID string) {
	*c = chainSyncs{live: true, tracker: tracker, topicID: topicID, startSource: -1, startTarget: -1, lastSource: -1, lastTarget: -1, written: -1, writtenPrevious: -1}
}

// chainOf returns the chain that follows tracker's acks, starting one when tracker is
// the partition's current assignment; nil for an ack of an older assignment. st.mu is
// held.
func (st *partitionSyncs) chainOf(p *partitionState, tracker *offsets.Tracker) *chainSyncs {
	switch {
	case st.cur.live && st.cur.tracker == tracker:
		return &st.cur
	case st.prev.live && st.prev.tracker == tracker:
		return &st.prev
	}
	p.mu.Lock()
	current := p.tracker == tracker
	topicID := p.topicIDOfLocked(tracker)
	p.mu.Unlock()
	if !current && st.cur.live {
		return nil
	}
	st.prev = st.cur
	st.cur.startChain(tracker, topicID)
	return &st.cur
}

// queuedSync is a sync on its way from the ack path to the writer: a value, so that
// queueing allocates nothing.
type queuedSync struct {
	part    *partitionState
	sync    OffsetSync
	topicID string
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
	c := &st.cur
	if !c.live || c.tracker != tracker {
		if c = st.chainOf(p, tracker); c == nil {
			st.mu.Unlock()
			return
		}
	}
	if c.startSource < 0 {
		c.startSource, c.startTarget = source, target
	}
	if source <= c.lastSource {
		// Acked out of order (a record sent again alone): the stretch is no longer one
		// run of the same delta.
		c.written = -1
		st.mu.Unlock()
		return
	}
	changed := c.lastSource < 0 || target-source != c.lastTarget-c.lastSource
	c.lastSource, c.lastTarget = source, target
	c.since++
	if changed || c.since >= offsetSyncEveryRecords {
		w.enqueueLocked(p, c, false)
	}
	st.mu.Unlock()
}

// enqueueLocked hands the chain's last acked position to the writer without waiting,
// as the chain's last sync when end is set; it reports whether the sync was queued.
// The partition's st.mu is held.
func (w *offsetSyncWriter) enqueueLocked(p *partitionState, c *chainSyncs, end bool) bool {
	previous := c.written
	if c.written == c.lastSource {
		// The same position again (only to say that the chain ended): same link.
		previous = c.writtenPrevious
	}
	s := OffsetSync{SourceOffset: c.lastSource, TargetOffset: c.lastTarget, Previous: previous,
		ChainSource: c.startSource, ChainTarget: c.startTarget, End: end}
	c.since = 0
	select {
	case w.queue <- queuedSync{part: p, sync: s, topicID: c.topicID}:
		c.written, c.writtenPrevious = c.lastSource, previous
		return true
	default:
		c.written = -1
		w.dropped.Add(1)
		return false
	}
}

// assignmentEnded tells the writer that tracker's assignment of p ended: no record is
// added to it any more, and neverSent of its records were never handed to the
// producer (they are never acked). Once the others are acked, the chain's last sync is
// written with End (flushPositions). A process that is killed, or an assignment whose
// records may still land in a way the chain does not see (an exactly-once transaction
// left to finish on its own), never calls it: its chain then has no end, which the
// translation treats as records that may follow its last sync.
func (w *offsetSyncWriter) assignmentEnded(p *partitionState, tracker *offsets.Tracker, neverSent int) {
	st := &p.syncs
	st.mu.Lock()
	c := &st.cur
	switch {
	case st.cur.live && st.cur.tracker == tracker:
	case st.prev.live && st.prev.tracker == tracker:
		c = &st.prev
	case tracker.InFlight() <= neverSent:
		// Nothing of it was acked and nothing will be: no chain.
		c = nil
	default:
		// None of its records was acked yet (its drain gave up on all of them): its
		// chain starts here, ended, and the late acks fill it in.
		c = st.chainOf(p, tracker)
	}
	if c != nil {
		c.ended, c.neverSent = true, neverSent
	}
	st.mu.Unlock()
}

// flushPositions queues the last acked position of every chain that moved since its
// last sync, and the last sync of every chain whose assignment ended and whose records
// were all acked.
func (w *offsetSyncWriter) flushPositions() {
	for _, p := range w.parts.all() {
		st := &p.syncs
		st.mu.Lock()
		for _, c := range []*chainSyncs{&st.cur, &st.prev} {
			if !c.live || c.lastSource < 0 || c.endWritten {
				continue
			}
			end := c.ended && (c.tracker == nil || c.tracker.InFlight() <= c.neverSent)
			if end || c.lastSource != c.written {
				c.endWritten = w.enqueueLocked(p, c, end) && end
			}
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
		Key: sarama.ByteEncoder(offsetSyncKey(q.part.topic, q.part.partition)), Value: sarama.ByteEncoder(q.sync.encode(q.topicID))}
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
