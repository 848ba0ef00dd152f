package mirror

import (
	"encoding/json"
	"strings"
	"time"
)

// checkpointMetadataPrefix starts the OffsetCommit metadata of every checkpoint the
// engine commits to a target group, so a reader tells the mirror's commits from the
// commits of the group's own consumers (which Kafka clients leave empty) without
// trying to decode them.
const checkpointMetadataPrefix = "kafka-mirror checkpoint "

// CheckpointMetadata is what the engine writes as the OffsetCommit metadata of each
// translated offset it commits to a target group. The committed offset says where the
// group's consumers would resume; the metadata says who put it there and when, so the
// operator can report the checkpoints by reading the target group alone (OffsetFetch
// returns the metadata), without translating again.
type CheckpointMetadata struct {
	// Mirror is the consumerGroup of the mirror that committed the checkpoint.
	Mirror string `json:"mirror"`
	// At is when the checkpoint was committed, Unix milliseconds.
	At int64 `json:"at"`
	// SourceTopic is the source topic (the committed topic is its renamed target).
	SourceTopic string `json:"sourceTopic"`
	// SourceTopicID is the source topic's ID (its incarnation) whose offset syncs
	// translated the offset; empty when the source cluster gives no topic IDs, or in a
	// checkpoint of an older engine.
	SourceTopicID string `json:"sourceTopicId,omitempty"`
	// SourceOffset is the source group's committed offset that was translated.
	SourceOffset int64 `json:"sourceOffset"`
}

// Time returns At as a time.
func (m CheckpointMetadata) Time() time.Time { return time.UnixMilli(m.At) }

// String encodes m as OffsetCommit metadata: the prefix and a JSON object, well under
// the brokers' offset.metadata.max.bytes (4096 by default) for any topic and group name
// Kafka accepts.
func (m CheckpointMetadata) String() string {
	b, _ := json.Marshal(m) // strings and integers: cannot fail
	return checkpointMetadataPrefix + string(b)
}

// ParseCheckpointMetadata decodes OffsetCommit metadata written by a mirror's
// checkpoint; ok is false for anything else (a consumer's own commit, an older
// engine's free text).
func ParseCheckpointMetadata(s string) (m CheckpointMetadata, ok bool) {
	rest, found := strings.CutPrefix(s, checkpointMetadataPrefix)
	if !found {
		return CheckpointMetadata{}, false
	}
	if err := json.Unmarshal([]byte(rest), &m); err != nil || m.Mirror == "" || m.At <= 0 {
		return CheckpointMetadata{}, false
	}
	return m, true
}
