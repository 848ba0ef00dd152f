package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// FailoverSpec declares the failover of a mirror to its target cluster
// (docs/failover.md): the operator stops the mirror, runs `kafka-mirror failover` as a
// Job and reports the outcome in status.failover.
type FailoverSpec struct {
	// mode is planned (producers stopped, both clusters up: mirror up to the source's end,
	// then write exact group checkpoints; nothing is left behind) or immediate (the source
	// is gone or must be abandoned: mirror nothing more, report what was left behind).
	// +required
	// +kubebuilder:validation:Enum=planned;immediate
	Mode string `json:"mode"`

	// timeout bounds the failover, as a duration string: for planned the whole
	// operation (default 5m), for immediate each wait for a cluster's answer (default
	// 30s).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="failover.timeout must be a positive duration such as 10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// FailoverPhase is where a declared failover stands.
// +kubebuilder:validation:Enum=Pending;Stopping;Running;Completed;Failed
type FailoverPhase string

const (
	// FailoverPending: declared, the operator has not acted on it yet.
	FailoverPending FailoverPhase = "Pending"
	// FailoverStopping: the Deployment is scaled to 0; its pods drain and commit.
	FailoverStopping FailoverPhase = "Stopping"
	// FailoverRunning: no mirror pod is left; the failover Job runs.
	FailoverRunning FailoverPhase = "Running"
	// FailoverCompleted: the Job succeeded; the report says what was left behind. The
	// mirror stays stopped.
	FailoverCompleted FailoverPhase = "Completed"
	// FailoverFailed: the Job failed; the message says why. Deleting the Job
	// <name>-failover runs the failover again.
	FailoverFailed FailoverPhase = "Failed"
)

// FailoverStatus is the state of a declared failover.
type FailoverStatus struct {
	// phase is Pending, Stopping, Running, Completed or Failed.
	// +optional
	Phase FailoverPhase `json:"phase,omitempty"`

	// startTime is when the operator began the failover (scaled the mirror to 0).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the failover Job completed or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// message says what the failover waits for, or how it ended.
	// +optional
	Message string `json:"message,omitempty"`

	// report is what the failover did, from the Job's report: per partition the
	// offsets at the cutover and the records left behind, per group the checkpoints
	// committed. Kept bounded: beyond a few partitions it holds the totals only.
	// +optional
	Report *FailoverReport `json:"report,omitempty"`
}

// FailoverReport is a compact `kafka-mirror failover` report (mirror.FailoverSummary).
type FailoverReport struct {
	// cutoverTime is when both clusters' ends were read: the cutover.
	// +optional
	CutoverTime *metav1.Time `json:"cutoverTime,omitempty"`

	// sourceReachable is false when the source did not answer (immediate mode): the
	// left-behind counts are then unknown.
	// +optional
	SourceReachable bool `json:"sourceReachable"`

	// partitions is the number of source partitions the failover covered.
	// +optional
	Partitions int32 `json:"partitions"`

	// leftBehind is the total of the known left-behind counts: source records not on
	// the target. 0 after a planned failover.
	// +optional
	LeftBehind int64 `json:"leftBehind"`

	// leftBehindUnknown is the number of partitions whose left-behind count is unknown
	// (the source was unreachable) or an upper bound (the mirror did not stop cleanly).
	// +optional
	LeftBehindUnknown int32 `json:"leftBehindUnknown,omitempty"`

	// truncated is true when the report covers too many partitions or groups to list:
	// partitionDetails and groupDetails are then left out and only the totals are kept;
	// the Job's log holds the full report.
	// +optional
	Truncated bool `json:"truncated,omitempty"`

	// partitionDetails lists each partition, when there are few enough.
	// +optional
	// +listType=atomic
	PartitionDetails []FailoverPartitionReport `json:"partitionDetails,omitempty"`

	// groupDetails lists each consumer group's checkpoints, when there are few enough.
	// +optional
	// +listType=atomic
	GroupDetails []FailoverGroupReport `json:"groupDetails,omitempty"`
}

// FailoverPartitionReport is one source partition at the cutover.
type FailoverPartitionReport struct {
	// topic is the source topic.
	// +required
	Topic string `json:"topic"`
	// partition is the partition number.
	// +required
	Partition int32 `json:"partition"`
	// sourceEnd is the source partition's end offset at the cutover; absent when the
	// source did not answer.
	// +optional
	SourceEnd *int64 `json:"sourceEnd,omitempty"`
	// committed is the mirror's commit point: every source record below it is on the
	// target or was filtered.
	// +optional
	Committed int64 `json:"committed"`
	// leftBehind is the number of source records not mirrored; absent when unknown.
	// +optional
	LeftBehind *int64 `json:"leftBehind,omitempty"`
	// targetEnd is the target partition's end offset at the cutover: the failback point.
	// +optional
	TargetEnd int64 `json:"targetEnd"`
}

// FailoverGroupReport is one consumer group's final checkpoint.
type FailoverGroupReport struct {
	// group is the consumer group.
	// +required
	Group string `json:"group"`
	// partitions is the number of the group's partitions translated.
	// +optional
	Partitions int32 `json:"partitions"`
	// committed is the number of those committed to the target.
	// +optional
	Committed int32 `json:"committed"`
	// exact is the number of those whose translation is exact.
	// +optional
	Exact int32 `json:"exact"`
}

// InitialPositionsSpec says where the partitions of a mirror without progress start.
type InitialPositionsSpec struct {
	// fromFailover names a KafkaMirror in the same namespace whose failover completed
	// (status.failover.phase Completed) and whose target cluster is this mirror's source
	// cluster (the two share a bootstrap server). Each partition this mirror has no
	// progress of starts at that failover's failback point, the target end offset at
	// the cutover, read by the engine from the failed-over mirror's progress on this
	// mirror's source cluster. Until then this mirror is not started.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	FromFailover string `json:"fromFailover"`
}

// InitialPositionsStatus is what spec.initialPositions resolved to.
type InitialPositionsStatus struct {
	// fromFailover is the KafkaMirror whose failover the mirror starts from.
	// +optional
	FromFailover string `json:"fromFailover,omitempty"`

	// consumerGroup is that KafkaMirror's consumer group: the engine reads the failback
	// points from its progress (mirror.yaml initialPositions.fromFailover).
	// +optional
	ConsumerGroup string `json:"consumerGroup,omitempty"`

	// resolvedTime is when the operator found the failover completed.
	// +optional
	ResolvedTime *metav1.Time `json:"resolvedTime,omitempty"`
}
