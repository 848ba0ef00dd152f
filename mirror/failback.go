package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Failback: the way back after a failover (docs/failover.md).
//
// A completed failover writes its failback points to the target cluster, into the
// mirror's progress topic (ProgressTopic(consumerGroup), compacted, no time
// retention): one record per target partition under the key
// "failover:<targetTopic>/<partition>" and then, last, one record under the key
// "failover" that names the failover and counts the partition records. Keys with a
// ':' cannot be progress records (a topic name has no ':'), so the engine's own reads
// of the topic pass over them. Being one record per partition, no size limit of a
// record, a status or a termination log bounds the number of partitions; the header
// written last makes a failover whose writes stopped halfway visible (its partitions
// are fewer than the header counts, or the header is the previous failover's).
//
// A reverse mirror (its source is the failed-over mirror's target) with
// initialPositions.fromFailover: <the failed-over mirror's consumerGroup> reads these
// records from ITS SOURCE cluster when it starts, and starts every partition that has
// no progress of its own (no offset in its group, its target-side group or its
// progress topic) at the partition's target end at the cutover: exactly the records
// written to the target after the cutover flow back, none of those mirrored before. A
// partition with progress resumes from it, so a restarted failback mirror never goes
// back. A point whose topic ID is not the topic's current one (the topic was deleted
// and created again since) is not used: the partition starts at initialOffset, with a
// warning. initialPositions.offsets entries work the same way and win over the
// failover's point of the same partition.

const (
	// failbackHeaderKey is the key of the failover's header record.
	failbackHeaderKey = "failover"
	// failbackPointPrefix starts the key of a partition's failback point:
	// "failover:<targetTopic>/<partition>".
	failbackPointPrefix = "failover:"
	// FailbackRecordVersion is the version of the failback records' JSON values.
	FailbackRecordVersion = 1
)

// FailbackHeader is the value of the "failover" record (JSON): which failover wrote
// the failback points and how many.
type FailbackHeader struct {
	// Version is FailbackRecordVersion.
	Version int `json:"version"`
	// Mirror is the failed-over mirror's consumerGroup.
	Mirror string `json:"mirror"`
	// Mode is the failover's mode.
	Mode FailoverMode `json:"mode"`
	// CutoverAt is when the failover read the ends; ID names this failover (its
	// cutover time, RFC 3339 with nanoseconds), repeated in every FailbackPoint.
	CutoverAt time.Time `json:"cutoverAt"`
	ID        string    `json:"id"`
	// SourceReachable reports that the source cluster answered the failover.
	SourceReachable bool `json:"sourceReachable"`
	// Partitions is the number of FailbackPoint records written before this one.
	Partitions int `json:"partitions"`
}

// FailbackPoint is the value of a "failover:<topic>/<partition>" record (JSON): where
// a failback starts on one target partition, and what the failover left behind on
// the source partition mirrored into it.
type FailbackPoint struct {
	// Version is FailbackRecordVersion; ID is the header's.
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Topic and Partition name the partition on the failed-over mirror's TARGET (the
	// renamed topic): the reverse mirror's source partition.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// TopicID is the target topic's ID at the cutover ("" when the cluster has none).
	TopicID string `json:"topicId,omitempty"`
	// Offset is the target partition's end at the cutover: the failback's start.
	Offset int64 `json:"offset"`
	// SourceTopic is the source topic mirrored into Topic (same partition number).
	SourceTopic string `json:"sourceTopic"`
	// LastMirroredOffset is the last source offset known to be on the target (-1 when
	// none); SourceEnd the source's end at the cutover, when it answered; LeftBehind
	// the source offsets from LastMirroredOffset+1 up to SourceEnd that were never
	// mirrored (LeftBehindNote says why it is unknown or an upper bound).
	LastMirroredOffset int64  `json:"lastMirroredOffset"`
	SourceEnd          *int64 `json:"sourceEnd,omitempty"`
	LeftBehind         *int64 `json:"leftBehind,omitempty"`
	LeftBehindNote     string `json:"leftBehindNote,omitempty"`
}

// Failback is a failover's failback points as read back from a cluster.
type Failback struct {
	Header FailbackHeader
	// Points are sorted by topic and partition.
	Points []FailbackPoint
}

func failbackPointKey(topic string, partition int32) string {
	return failbackPointPrefix + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// isFailbackKey reports whether a progress topic key is a failback record's.
func isFailbackKey(k []byte) bool {
	s := string(k)
	return s == failbackHeaderKey || strings.HasPrefix(s, failbackPointPrefix)
}

// writeFailbackPoints writes the report's failback points to the mirror's progress
// topic on the target (creating it when missing): the partition records, then the
// header.
func (f *failover) writeFailbackPoints(ctx context.Context) error {
	if err := f.tryWriteFailbackPoints(ctx); err != nil {
		return fmt.Errorf("everything else of the failover is done, but its failback points were not written, so a failback with initialPositions.fromFailover cannot start "+
			"(run the failover again before anything is written to the target, or give the failback mirror the report's TARGET-END (FAILBACK) offsets as initialPositions.offsets): %w", err)
	}
	return nil
}

func (f *failover) tryWriteFailbackPoints(ctx context.Context) error {
	r := f.report
	if r.CutoverAt == nil {
		return errors.New("the failover read no cutover: no failback point to write")
	}
	var names []string
	for _, p := range r.Partitions {
		names = append(names, p.TargetTopic)
	}
	ids, err := describeTopicIDs(ctx, f.target.admin, names)
	if err != nil {
		f.log.Error(err, "Failed to read the target topics' IDs; the failback points name none")
	}
	h := FailbackHeader{Version: FailbackRecordVersion, Mirror: f.cfg.ConsumerGroup, Mode: r.Mode, CutoverAt: *r.CutoverAt,
		ID: r.CutoverAt.Format(time.RFC3339Nano), SourceReachable: r.SourceReachable}
	var msgs []*sarama.ProducerMessage
	topic := ProgressTopic(f.cfg.ConsumerGroup)
	for _, p := range r.Partitions {
		if p.TargetEnd < 0 {
			continue
		}
		v, err := json.Marshal(FailbackPoint{Version: FailbackRecordVersion, ID: h.ID, Topic: p.TargetTopic, Partition: p.Partition,
			TopicID: ids[p.TargetTopic], Offset: p.TargetEnd, SourceTopic: p.Topic, LastMirroredOffset: p.LastMirroredOffset,
			SourceEnd: p.SourceEnd, LeftBehind: p.LeftBehind, LeftBehindNote: p.LeftBehindNote})
		if err != nil {
			return err
		}
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0,
			Key: sarama.StringEncoder(failbackPointKey(p.TargetTopic, p.Partition)), Value: sarama.ByteEncoder(v)})
	}
	h.Partitions = len(msgs)
	hv, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := topics.EnsureTopic(f.target.admin, topic, topics.TopicSpec{Partitions: 1, Configs: map[string]string{
		"cleanup.policy": "compact",
		"segment.ms":     fmt.Sprint(progressTopicSegment.Milliseconds()),
	}}); err != nil {
		return fmt.Errorf("while creating progress topic %q on the target cluster for the failback points: %w", topic, err)
	}
	pc, err := offsetSyncProducerConfig(f.cfg, f.o.kafkaOpts)
	if err != nil {
		return err
	}
	pc.Producer.Return.Successes = true
	client, err := kafka.NewClientFromConfig(f.cfg.Target, pc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, f.o.kafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("while connecting the producer of the failback points: %w", err)
	}
	defer client.Close()
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return fmt.Errorf("while opening the producer of the failback points: %w", err)
	}
	defer producer.Close()
	header := &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(failbackHeaderKey), Value: sarama.ByteEncoder(hv)}
	for _, batch := range [][]*sarama.ProducerMessage{msgs, {header}} {
		if len(batch) == 0 {
			continue
		}
		if err := producer.SendMessages(batch); err != nil {
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) && len(perrs) > 0 {
				err = perrs[0].Err
			}
			return fmt.Errorf("while writing the failback points to progress topic %q on the target cluster: %w", topic, err)
		}
	}
	f.log.Info("Wrote the failback points", "progressTopic", topic, "partitions", h.Partitions, "id", h.ID)
	return nil
}

// ReadFailback reads the failback points the failover of the mirror with consumer
// group mirror wrote to client's cluster (its target, a reverse mirror's source). It
// fails, saying what it looked for, when there are none or they are incomplete.
func ReadFailback(ctx context.Context, client sarama.Client, mirror string) (*Failback, error) {
	topic := ProgressTopic(mirror)
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return nil, fmt.Errorf("no failover of mirror %q: its progress topic %q does not exist on this cluster (is it the failed-over mirror's target, and did its failover complete?)", mirror, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("while reading the end of progress topic %q: %w", topic, err)
	}
	var header *FailbackHeader
	points := map[string]FailbackPoint{}
	var bad error
	if _, err := readTopicToEnd(ctx, client, topic, 0, end, func(m *sarama.ConsumerMessage) {
		switch k := string(m.Key); {
		case k == failbackHeaderKey:
			var h FailbackHeader
			if err := json.Unmarshal(m.Value, &h); err != nil || h.Version != FailbackRecordVersion {
				bad = fmt.Errorf("the failover record at offset %d of %q is not version %d JSON", m.Offset, topic, FailbackRecordVersion)
				return
			}
			header, bad = &h, nil
		case strings.HasPrefix(k, failbackPointPrefix):
			var p FailbackPoint
			if err := json.Unmarshal(m.Value, &p); err == nil && p.Version == FailbackRecordVersion {
				points[k] = p
			}
		}
	}); err != nil {
		return nil, fmt.Errorf("while reading progress topic %q: %w", topic, err)
	}
	if bad != nil {
		return nil, bad
	}
	if header == nil {
		return nil, fmt.Errorf("no failover of mirror %q: progress topic %q holds no record with key %q (did its failover complete?)", mirror, topic, failbackHeaderKey)
	}
	fb := &Failback{Header: *header}
	for _, p := range points {
		if p.ID == header.ID {
			fb.Points = append(fb.Points, p)
		}
	}
	if len(fb.Points) != header.Partitions {
		return nil, fmt.Errorf("the failover of mirror %q at %s is incomplete in progress topic %q: %d of its %d failback points found",
			mirror, header.ID, topic, len(fb.Points), header.Partitions)
	}
	sort.Slice(fb.Points, func(i, j int) bool {
		a, b := fb.Points[i], fb.Points[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return fb, nil
}

// initialPosition is where a partition without progress starts, and from what.
type initialPosition struct {
	offset  int64
	topicID string
	from    string
}

// initialPositions are the start offsets of initialPositions, by source partition.
type initialPositions map[partitionKey]initialPosition

// loadInitialPositions reads initialPositions: the failback points of fromFailover
// from the source cluster, then the listed offsets, which win for their partition.
func loadInitialPositions(ctx context.Context, cfg *config.Config, source sarama.Client, log logr.Logger) (initialPositions, *failbackTranslation, error) {
	ip := cfg.InitialPositions
	if ip == nil {
		return nil, nil, nil
	}
	out := initialPositions{}
	var ft *failbackTranslation
	if ip.FromFailover != "" {
		fb, err := ReadFailback(ctx, source, ip.FromFailover)
		if err != nil {
			return nil, nil, fmt.Errorf("initialPositions.fromFailover: %q: %w", ip.FromFailover, err)
		}
		if cfg.GroupsEnabled() {
			if ft, err = newFailbackTranslation(ctx, source, ip.FromFailover, fb, log); err != nil {
				return nil, nil, fmt.Errorf("initialPositions.fromFailover: %q: %w", ip.FromFailover, err)
			}
		}
		from := fmt.Sprintf("the %s failover of mirror %q at %s", fb.Header.Mode, fb.Header.Mirror, fb.Header.CutoverAt.Format(time.RFC3339))
		for _, p := range fb.Points {
			out[partitionKey{p.Topic, p.Partition}] = initialPosition{offset: p.Offset, topicID: p.TopicID, from: from}
		}
		log.Info("Read the failback points", "fromFailover", ip.FromFailover, "mode", string(fb.Header.Mode),
			"cutoverAt", fb.Header.CutoverAt, "partitions", len(fb.Points))
		warnRenameNotReversed(cfg, fb, log)
	}
	for i, o := range ip.Offsets {
		out[partitionKey{o.Topic, o.Partition}] = initialPosition{offset: o.Offset, topicID: o.TopicID,
			from: fmt.Sprintf("initialPositions.offsets[%d]", i)}
	}
	return out, ft, nil
}

// warnRenameNotReversed says, once per topic, when cfg's topics.rename writes a
// failback point's topic (the failed-over mirror's target topic) to another topic
// than the one it was mirrored from: the records written after the cutover would flow
// back into a topic of their own on the original source. A warning, not an error: the
// rename may be meant.
func warnRenameNotReversed(cfg *config.Config, fb *Failback, log logr.Logger) {
	sel, err := topics.NewSelector(cfg.Topics)
	if err != nil {
		return // config.Validate reports it
	}
	seen := map[string]bool{}
	for _, p := range fb.Points {
		if seen[p.Topic] || p.SourceTopic == "" || !sel.Matches(p.Topic) {
			continue
		}
		seen[p.Topic] = true
		if to := sel.TargetName(p.Topic); to != p.SourceTopic {
			log.Info("Warning: failing back into another topic than the failover mirrored from; set topics.rename to map it back (stripPrefix for a prefix)",
				"topic", p.Topic, "targetTopic", to, "failedOverFrom", p.SourceTopic)
		}
	}
}

// failbackTranslation translates a group offset on a failback mirror's source that is
// below the partition's failback point, where the failback mirror has no offset sync:
// the records there were mirrored by the failed-over mirror, whose offset syncs (on
// the same cluster, its target) say where each of them came from. The group has read
// every record below its offset c, so it resumes on the original source at the
// smallest source offset s whose copy is at or after c. Only an exact answer is
// given (every translation around s exact); otherwise none, and the group keeps its
// offset on the original source (earlier: it reads again, never skips).
type failbackTranslation struct {
	points map[partitionKey]FailbackPoint
	store  *offsetSyncStore
}

// newFailbackTranslation reads the offset syncs of the failed-over mirror mirror from
// client's cluster (its target).
func newFailbackTranslation(ctx context.Context, client sarama.Client, mirror string, fb *Failback, log logr.Logger) (*failbackTranslation, error) {
	ft := &failbackTranslation{points: map[partitionKey]FailbackPoint{}, store: newOffsetSyncStore(OffsetSyncTopic(mirror))}
	for _, p := range fb.Points {
		ft.points[partitionKey{p.Topic, p.Partition}] = p
	}
	if err := readOffsetSyncs(ctx, client, ft.store, log); err != nil {
		return nil, fmt.Errorf("while reading its offset syncs: %w", err)
	}
	return ft, nil
}

func (ft *failbackTranslation) translate(tp partitionKey, c int64) (int64, bool) {
	if ft == nil {
		return 0, false
	}
	p, ok := ft.points[tp]
	if !ok || c >= p.Offset || p.LastMirroredOffset < 0 {
		return 0, false
	}
	src := partitionKey{p.SourceTopic, tp.partition}
	id := ft.store.latestTopicID(src)
	fwd := func(s int64) (int64, bool) {
		to, exact, ok := ft.store.translate(src, id, s)
		return to, ok && exact
	}
	// The smallest s in [0, last] whose copy is at or after c (translations grow with s).
	lo, hi := int64(0), p.LastMirroredOffset+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if to, ok := fwd(mid); ok && to >= c {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	s := lo
	if s <= p.LastMirroredOffset {
		if to, ok := fwd(s); !ok || to < c {
			return 0, false
		}
	}
	if s > 0 {
		if to, ok := fwd(s - 1); !ok || to >= c {
			return 0, false
		}
	}
	return s, true
}

// startAtInitialPosition starts a claimed partition that has no progress at all at its
// initial position, when it has one of the topic's current incarnation. It reports
// whether it did; a position of another incarnation is logged and not used.
func (e *Engine) startAtInitialPosition(sess sarama.ConsumerGroupSession, tp partitionKey, currentID string, log logr.Logger) bool {
	ip, ok := e.initial[tp]
	switch {
	case !ok:
		return false
	case ip.topicID != "" && currentID != "" && ip.topicID != currentID:
		log.Info("Warning: the initial position is of another incarnation of the topic (deleted and created again since), so it is not used; the partition starts at initialOffset",
			"topic", tp.topic, "partition", tp.partition, "offset", ip.offset, "from", ip.from, "topicId", ip.topicID, "currentTopicId", currentID)
		return false
	}
	seek(sess, tp, ip.offset)
	log.Info("Started partition at its initial position: no group and no progress topic have an offset for it",
		"topic", tp.topic, "partition", tp.partition, "offset", ip.offset, "from", ip.from)
	return true
}
