package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// The progress topic: the engine's progress where no offset retention reaches it.
//
// The two groups that hold a mirror's progress, the source group and the target-side
// group (ProgressGroup), are written only while the mirror runs, and Kafka drops a
// group's offsets once it has had no members for offsets.retention.minutes: 7 days by
// default, the same on both clusters unless someone changed one. A mirror paused (0
// replicas) or stopped for longer lost both at once and started over at initialOffset:
// every record again with oldest, the records written meanwhile lost with latest.
//
// So the engine also writes its progress to a compacted topic on the target cluster,
// ProgressTopic(consumerGroup): one record per source partition, keyed by the source
// topic and partition ("orders/3", as offset syncs are), whose value is the next source
// offset and the topic's ID (its incarnation, incarnation.go). Compaction keeps the
// latest record of every key and a compacted topic has no time retention, so the record
// outlives any pause; being keyed by the source partition, it needs no partition of the
// target topics (unlike the target-side group, which Kafka keys by an existing one).
//
// It is the last resort: read only for a partition that no group has a position of its
// incarnation for (at-least-once: the source group, then the target-side group;
// exactly-once: the offset in the last transaction, then the source group). It holds
// commit points only (every record below acked by the target, or dropped on purpose),
// so it never makes a partition skip a record; it is written, for the partitions whose
// commit point moved, every progressTopicInterval and once more when the engine stops
// cleanly, so after a crash it may be up to progressTopicInterval behind the groups:
// records mirrored again, which only matters when both groups expired as well.
//
// Why a topic rather than keeping the groups fresh while paused: nothing of a paused
// mirror runs (0 replicas, or a process stopped outside Kubernetes), the operator has
// no credentials of the target's principal, and an operator re-committing an offset it
// read could race the engine's own commit when the mirror resumes and set the progress
// back. Why a topic per mirror: the same reason as the offset-sync topic, a mirror's
// principal can be granted its own topic by prefix.

const (
	progressTopicPrefix = "__kafka-mirror.progress."
	// progressTopicInterval is how often the moved commit points are written to the
	// progress topic (and once more at a clean stop).
	progressTopicInterval = 5 * time.Second
	// progressTopicReopen spaces the attempts to create or open the topic after one
	// failed (a missing ACL: logged once, not every interval).
	progressTopicReopen = time.Minute
	// progressTopicSegment rolls the topic's segments hourly, so that compaction (which
	// never cleans the active segment) keeps it at about one record per partition
	// instead of a week of them (segment.ms defaults to 7 days).
	progressTopicSegment = time.Hour
	// progressRecordVersion is the first byte of a progress record's value.
	progressRecordVersion = 1
	// progressRecordFixed is the value's version byte and next offset; the topic ID
	// follows.
	progressRecordFixed = 1 + 8
)

// ProgressTopic returns the name of the compacted topic on the target cluster in which
// a mirror with source group consumerGroup keeps a copy of its progress that no offset
// retention expires: "__kafka-mirror.progress.<consumerGroup>", characters Kafka does
// not allow in topic names replaced by '_', cut to Kafka's 249 characters. The "__"
// prefix keeps it out of every mirror's topic selection, a reverse mirror's included.
func ProgressTopic(consumerGroup string) string {
	name := progressTopicPrefix + invalidTopicChars.ReplaceAllString(consumerGroup, "_")
	if len(name) > config.MaxTopicNameLength {
		name = name[:config.MaxTopicNameLength]
	}
	return name
}

// encodeProgressRecord is a progress record's value: version, next offset, topic ID.
func encodeProgressRecord(p position) []byte {
	b := make([]byte, progressRecordFixed, progressRecordFixed+len(p.topicID))
	b[0] = progressRecordVersion
	binary.BigEndian.PutUint64(b[1:], uint64(p.next))
	return append(b, p.topicID...)
}

func decodeProgressRecord(b []byte) (position, error) {
	if len(b) < progressRecordFixed || b[0] != progressRecordVersion {
		return position{}, fmt.Errorf("progress record value of %d bytes is not version %d", len(b), progressRecordVersion)
	}
	p := position{next: int64(binary.BigEndian.Uint64(b[1:])), topicID: string(b[progressRecordFixed:])}
	if p.next < 0 {
		return position{}, fmt.Errorf("progress record names offset %d", p.next)
	}
	return p, nil
}

// progressTopic writes and reads the progress topic. The keeper's goroutine alone
// opens, writes and closes it; sessions' Setup read it, one at a time.
type progressTopic struct {
	name  string
	cfg   *config.Config
	opts  []kafka.Option
	admin sarama.ClusterAdmin
	// reader is the target admin's client: it reads the topic.
	reader sarama.Client
	log    logr.Logger

	// The keeper's goroutine only: the producer and its client (nil until opened),
	// when and why an open last failed, and what was last written per partition.
	producer   sarama.SyncProducer
	client     sarama.Client
	openFailed time.Time
	openErr    error
	written    map[partitionKey]position

	// readMu serialises reads; store is what was read so far, next the topic's next
	// offset to read.
	readMu sync.Mutex
	store  map[partitionKey]position
	next   int64
}

func newProgressTopic(e *Engine, admin sarama.ClusterAdmin, reader sarama.Client) *progressTopic {
	name := ProgressTopic(e.cfg.ConsumerGroup)
	return &progressTopic{name: name, cfg: e.cfg, opts: e.kafkaOpts, admin: admin, reader: reader,
		log: e.log.WithValues("progressTopic", name), written: map[partitionKey]position{}, store: map[partitionKey]position{}}
}

// open creates the topic when missing (compacted, one partition) and opens its
// producer, unless it is open or an attempt failed less than progressTopicReopen ago.
// A failure is logged by the caller; the mirror goes on (the groups still hold the
// progress).
func (t *progressTopic) open() error {
	switch {
	case t.producer != nil:
		return nil
	case t.openErr != nil && time.Since(t.openFailed) < progressTopicReopen:
		return t.openErr
	}
	t.openErr = t.tryOpen()
	if t.openErr != nil {
		t.openFailed = time.Now()
	}
	return t.openErr
}

func (t *progressTopic) tryOpen() error {
	if _, err := topics.EnsureTopic(t.admin, t.name, topics.TopicSpec{Partitions: 1, Configs: map[string]string{
		"cleanup.policy": "compact",
		"segment.ms":     fmt.Sprint(progressTopicSegment.Milliseconds()),
	}}); err != nil {
		return fmt.Errorf("while creating progress topic %q on the target cluster: %w", t.name, err)
	}
	pc, err := offsetSyncProducerConfig(t.cfg, t.opts)
	if err != nil {
		return err
	}
	pc.Producer.Return.Successes = true
	client, err := kafka.NewClientFromConfig(t.cfg.Target, pc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, t.opts...)...)
	if err != nil {
		return fmt.Errorf("while connecting the producer of progress topic %q: %w", t.name, err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		_ = client.Close()
		return fmt.Errorf("while opening the producer of progress topic %q: %w", t.name, err)
	}
	t.producer, t.client = producer, client
	return nil
}

// write writes, in one request, the positions of latest that differ from what was last
// written, opening the topic first when needed.
func (t *progressTopic) write(latest map[partitionKey]position) error {
	if err := t.open(); err != nil {
		return err
	}
	var msgs []*sarama.ProducerMessage
	for tp, p := range latest {
		if w, ok := t.written[tp]; ok && w == p {
			continue
		}
		msgs = append(msgs, &sarama.ProducerMessage{Topic: t.name, Partition: 0,
			Key: sarama.ByteEncoder(offsetSyncKey(tp.topic, tp.partition)), Value: sarama.ByteEncoder(encodeProgressRecord(p))})
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := t.producer.SendMessages(msgs); err != nil {
		// sarama's ProducerErrors says only how many failed: name the first cause.
		var perrs sarama.ProducerErrors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			err = perrs[0].Err
		}
		return fmt.Errorf("while writing %d records to progress topic %q: %w", len(msgs), t.name, err)
	}
	for tp, p := range latest {
		t.written[tp] = p
	}
	return nil
}

// close closes the producer and its client.
func (t *progressTopic) close() {
	if t.producer != nil {
		_ = t.producer.Close()
		_ = t.client.Close()
		t.producer = nil
	}
}

// read reads the topic from where the last read ended up to its end as of the call and
// returns the latest record of every source partition (a copy). A topic that does not
// exist holds nothing. What was read before ctx ended is kept for the next read.
func (t *progressTopic) read(ctx context.Context) (map[partitionKey]position, error) {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	if !t.known() {
		return maps.Clone(t.store), nil
	}
	end, err := t.reader.GetOffset(t.name, 0, sarama.OffsetNewest)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return maps.Clone(t.store), nil
	}
	if err != nil {
		return nil, fmt.Errorf("while reading the end of progress topic %q: %w", t.name, err)
	}
	if end < t.next {
		// The topic was deleted and created again: what was read belongs to the old one.
		t.store, t.next = map[partitionKey]position{}, 0
	}
	next, err := readTopicToEnd(ctx, t.reader, t.name, t.next, end, func(m *sarama.ConsumerMessage) {
		if isFailbackKey(m.Key) {
			return // a failover's failback points (failback.go), not progress
		}
		tp, kerr := parseOffsetSyncKey(m.Key)
		p, verr := decodeProgressRecord(m.Value)
		if err := errors.Join(kerr, verr); err != nil {
			t.log.V(1).Info("Ignored a record of the progress topic", "offset", m.Offset, "reason", err.Error())
			return
		}
		t.store[tp] = p
	})
	t.next = next
	if err != nil {
		return nil, fmt.Errorf("while reading progress topic %q: %w", t.name, err)
	}
	return maps.Clone(t.store), nil
}

// known reports whether the topic may be there: it is in the reader's metadata, or one
// metadata request does not deny it. A mirror's first start has no progress topic yet
// (it is created at the first write), and asked for a missing topic the reader's
// GetOffset refreshes its metadata with retries and backoff before it gives up: about a
// second of the first session's Setup across a 100 ms round trip. DescribeTopics asks
// once and creates nothing. When that question fails, known answers true and GetOffset
// decides, as before.
func (t *progressTopic) known() bool {
	if cached, err := t.reader.Topics(); err == nil && slices.Contains(cached, t.name) {
		return true
	}
	meta, err := t.admin.DescribeTopics([]string{t.name})
	if err != nil || len(meta) != 1 {
		return true
	}
	return !errors.Is(meta[0].Err, sarama.ErrUnknownTopicOrPartition)
}

// readTopicToEnd reads partition 0 of topic from offset from (or its log start, when
// compaction or retention removed from) up to end, exclusive, handing each record to
// each, and returns the next offset to read: end, or where ctx or an error stopped it.
func readTopicToEnd(ctx context.Context, client sarama.Client, topic string, from, end int64, each func(*sarama.ConsumerMessage)) (int64, error) {
	if from >= end {
		return from, nil
	}
	start, err := client.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return from, fmt.Errorf("while reading the log start offset: %w", err)
	}
	from = max(from, start)
	if from >= end {
		return end, nil
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return from, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, from)
	if err != nil {
		return from, err
	}
	defer pc.AsyncClose()
	for from < end {
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				return from, errors.New("the consumer closed")
			}
			from = m.Offset + 1
			each(m)
		case cerr := <-pc.Errors():
			return from, cerr
		case <-ctx.Done():
			return from, ctx.Err()
		}
	}
	return from, nil
}
