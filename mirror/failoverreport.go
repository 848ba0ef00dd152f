package mirror

import "time"

// FailoverMode is how Failover cuts over (docs/failover.md).
type FailoverMode string

const (
	// FailoverPlanned mirrors until every selected partition is committed up to the
	// source's end, writes the final checkpoints of the groups (exact) and stops:
	// nothing is left behind.
	FailoverPlanned FailoverMode = "planned"
	// FailoverImmediate mirrors nothing more: it reports what the target holds, what was
	// left behind (when the source can still be asked) and writes the checkpoints that
	// can be computed from what the target holds.
	FailoverImmediate FailoverMode = "immediate"
)

// Reasons a count in a FailoverReport is not known.
const (
	// UnknownSourceUnreachable: the source cluster did not answer within the timeout.
	UnknownSourceUnreachable = "unknown: source unreachable"
	// UnknownNoOffsetSync: no offset sync names the record (groups is not set, or the
	// mirror wrote none for it yet).
	UnknownNoOffsetSync = "unknown: no offset sync"
)

// FailoverReport says exactly what a failover did and left behind. It is
// JSON-serialisable as it is, so that the operator can keep it in status.failover and
// `kafka-mirror failover -o json` prints it.
type FailoverReport struct {
	// Mode is the failover's mode.
	Mode FailoverMode `json:"mode"`
	// Mirror is the mirror's consumerGroup.
	Mirror string `json:"mirror"`
	// StartedAt is when the failover started; CutoverAt when the mirror stopped (the
	// source and target ends below were read then); CompletedAt when it ended, whether
	// it succeeded or failed.
	StartedAt   time.Time  `json:"startedAt"`
	CutoverAt   *time.Time `json:"cutoverAt,omitempty"`
	CompletedAt time.Time  `json:"completedAt"`
	// Completed reports that the failover did everything its mode promises; Error says
	// why not when it did not.
	Completed bool   `json:"completed"`
	Error     string `json:"error,omitempty"`
	// SourceReachable reports that the source cluster answered (always true for a
	// completed planned failover).
	SourceReachable bool `json:"sourceReachable"`
	// Partitions holds one entry per selected source partition, sorted by topic and
	// partition.
	Partitions []FailoverPartition `json:"partitions"`
	// Groups holds one entry per selected consumer group (groups.include), sorted by name.
	Groups []FailoverGroup `json:"groups,omitempty"`
}

// FailoverPartition is what one source partition's failover left on the target.
type FailoverPartition struct {
	// Topic and Partition name the source partition; TargetTopic is its target topic
	// (renamed by topics.rename), same partition number.
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	TargetTopic string `json:"targetTopic"`
	// SourceEnd is the source partition's end offset (high watermark) at the cutover;
	// absent when the source did not answer.
	SourceEnd *int64 `json:"sourceEnd,omitempty"`
	// Committed is the mirror's commit point: every source record below it is on the
	// target (or was dropped on purpose by a handler); -1 when the mirror never
	// committed the partition.
	Committed int64 `json:"committed"`
	// LastMirroredOffset is the last source offset known to be on the target and
	// LastMirroredTargetOffset where it landed (-1 when none, or not known: see
	// LastMirroredNote). It may be past Committed - 1 when the mirror stopped without
	// committing what the target had acknowledged.
	LastMirroredOffset       int64  `json:"lastMirroredOffset"`
	LastMirroredTargetOffset int64  `json:"lastMirroredTargetOffset"`
	LastMirroredNote         string `json:"lastMirroredNote,omitempty"`
	// LeftBehind is the number of source offsets after LastMirroredOffset (or
	// Committed) up to SourceEnd: records never mirrored (0 for a planned failover).
	// Absent when not known; LeftBehindNote then says why.
	LeftBehind     *int64 `json:"leftBehind,omitempty"`
	LeftBehindNote string `json:"leftBehindNote,omitempty"`
	// TargetEnd is the target partition's end offset at the cutover: the failback
	// point, from which a reverse mirror copies exactly the records written to the
	// target after the cutover. -1 when the target partition does not exist.
	TargetEnd int64 `json:"targetEnd"`
}

// FailoverGroup is the final checkpoint of one consumer group.
type FailoverGroup struct {
	// Group is the source group and the target group of the same name.
	Group string `json:"group"`
	// ActiveMembers is the number of members the target group had: with members,
	// nothing is committed (its consumers moved already).
	ActiveMembers int `json:"activeMembers"`
	// Partitions are the group's translated partitions, sorted by topic and partition.
	Partitions []FailoverGroupPartition `json:"partitions"`
}

// FailoverGroupPartition is one partition of a group's final checkpoint.
type FailoverGroupPartition struct {
	// Topic and Partition name the source partition; TargetTopic its target topic.
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	TargetTopic string `json:"targetTopic"`
	// SourceOffset is the source group's committed offset that was translated.
	SourceOffset int64 `json:"sourceOffset"`
	// TargetOffset is where the group's consumers resume on the target (-1 when it
	// could not be translated).
	TargetOffset int64 `json:"targetOffset"`
	// Exact reports that no record before SourceOffset is read again from TargetOffset.
	Exact bool `json:"exact"`
	// AheadOfMirror reports that SourceOffset is past the mirror's commit point: the
	// group read records on the source that are not (known to be) on the target.
	AheadOfMirror bool `json:"aheadOfMirror,omitempty"`
	// Committed reports that TargetOffset was committed to the target group; Result
	// says what happened ("committed", "unchanged", or why it was skipped).
	Committed bool   `json:"committed"`
	Result    string `json:"result"`
}
