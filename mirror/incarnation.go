package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// A source topic that is deleted and created again under the same name is a new topic:
// its offsets start again at 0 and its records are not the old ones. Kafka drops the
// deleted topic's offsets from every group, but a position the engine stored elsewhere
// (the target-side progress, the offset in the last exactly-once transaction) or a
// commit sent by a claim that still read the old topic would otherwise make the new
// topic resume at the old topic's offset: every record below it lost without a word.
//
// So every stored position names the incarnation it belongs to: the topic ID Kafka
// gives each topic it creates (in metadata since Kafka 2.8), appended to the entry's
// commit metadata. A position of another incarnation is never used: the partition of
// the new topic starts at its beginning. An entry without an ID was written before the
// engine recorded them (or by a person resetting the group with a tool) and is used as
// it is: refusing it would restart every partition of an upgraded mirror whose source
// group expired, and its next commit writes the ID.

// topicIDMark separates an entry's metadata from the topic ID it names.
const topicIDMark = " topic id "

// sourceCommitMetadata is the metadata of the engine's commits to the source group.
const sourceCommitMetadata = "kafka-mirror"

// withTopicID appends the topic ID to an entry's metadata (nothing when unknown).
func withTopicID(meta, id string) string {
	if id == "" {
		return meta
	}
	return meta + topicIDMark + id
}

// entryVerdict is what a stored position means for the topic as it is now.
type entryVerdict int

const (
	// entryForeign is not an entry of this kind (other metadata).
	entryForeign entryVerdict = iota
	// entryCurrent names the topic's current ID, or no ID is known on either side.
	entryCurrent
	// entryLegacy names no ID: written before IDs were recorded.
	entryLegacy
	// entryOtherIncarnation names another ID: written for a deleted topic of the same name.
	entryOtherIncarnation
)

// judgeEntry compares an entry's metadata with base (its metadata without an ID) and
// the topic's current ID ("" when unknown), and returns the ID the entry names.
func judgeEntry(meta, base, currentID string) (entryVerdict, string) {
	if meta == base {
		return entryLegacy, ""
	}
	stored, ok := strings.CutPrefix(meta, base+topicIDMark)
	switch {
	case !ok:
		return entryForeign, ""
	case currentID == "" || stored == currentID:
		return entryCurrent, stored
	default:
		return entryOtherIncarnation, stored
	}
}

// usable reports whether a position with this verdict may be resumed from.
func (v entryVerdict) usable() bool { return v == entryCurrent || v == entryLegacy }

// topicIDLimit bounds the topic ID look-up of a topic sync.
const topicIDLimit = 30 * time.Second

// sourceTopicIDs reads the topic IDs of topics. A topic whose ID the cluster does not
// give (a Kafka before 2.8, an error for that topic) is left out: its positions are
// then judged without an ID, as before.
func sourceTopicIDs(ctx context.Context, admin sarama.ClusterAdmin, topics []string) (map[string]string, error) {
	ids, err := describeTopicIDs(ctx, admin, topics)
	for t, id := range ids {
		if id == "" {
			delete(ids, t)
		}
	}
	return ids, err
}

// describeTopicIDs reads the topic IDs of topics: "" for a topic the cluster describes
// without an ID (a Kafka before 2.8); a topic it does not describe (unknown, or an
// error for that topic) is left out.
func describeTopicIDs(ctx context.Context, admin sarama.ClusterAdmin, topics []string) (map[string]string, error) {
	ids := make(map[string]string, len(topics))
	if len(topics) == 0 {
		return ids, nil
	}
	type answer struct {
		md  []*sarama.TopicMetadata
		err error
	}
	done := make(chan answer, 1)
	go func() {
		md, err := admin.DescribeTopics(topics)
		done <- answer{md, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(topicIDLimit):
		return nil, fmt.Errorf("no answer within %v", topicIDLimit)
	}
	if a.err != nil {
		return nil, a.err
	}
	var zero sarama.Uuid
	for _, t := range a.md {
		switch {
		case t.Err != sarama.ErrNoError:
		case t.Uuid == zero:
			ids[t.Name] = ""
		default:
			ids[t.Name] = t.Uuid.String()
		}
	}
	return ids, nil
}

// restartIncarnation makes the session's claim of tp start at the beginning of the
// topic's new incarnation and says so. oldest is the partition's log start offset.
func (e *Engine) restartIncarnation(sess sarama.ConsumerGroupSession, client sarama.Client, tp partitionKey, previousID, currentID, where string) error {
	oldest, err := client.GetOffset(tp.topic, tp.partition, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("while reading the log start offset of re-created source topic %s/%d: %w", tp.topic, tp.partition, err)
	}
	seek(sess, tp, oldest)
	e.parts.get(tp.topic, tp.partition).recreated.Add(1)
	e.log.Info("Warning: the source topic was deleted and created again; its new incarnation is mirrored from its beginning, and the position stored for the old one is not used",
		"topic", tp.topic, "partition", tp.partition, "previousTopicId", previousID, "topicId", currentID,
		"startOffset", oldest, "storedIn", where)
	return nil
}

// recreatedUnder reports whether topic, whose ID was sessionID when a session started,
// has another ID now, read from the source cluster at once. If so the selected topics
// are published again with the new ID, which restarts every session: their claims then
// judge the stored positions against the new incarnation and start at its beginning.
// An unknown sessionID, or an ID that cannot be read, answers false: the caller then
// treats the error as it would without re-creations.
func (e *Engine) recreatedUnder(topic, sessionID string) bool {
	if sessionID == "" || e.keeper == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), topicIDLimit)
	defer cancel()
	ids, err := sourceTopicIDs(ctx, e.keeper.sourceAdmin, []string{topic})
	if err != nil || ids[topic] == "" || ids[topic] == sessionID {
		return false
	}
	list, _ := e.topics.get()
	known := e.topics.topicIDs()
	known[topic] = ids[topic]
	if _, recreated := e.topics.set(list, known); len(recreated) > 0 {
		e.log.Info("Warning: a source topic was deleted and created again while mirrored (its old offset is out of range in the new topic); its partitions are assigned anew and start at the new topic's beginning",
			"topic", topic, "previousTopicId", sessionID, "topicId", ids[topic])
	}
	return true
}
