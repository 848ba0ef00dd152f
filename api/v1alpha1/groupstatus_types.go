package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// MaxGroupStatuses caps status.groups.items (and the groups the operator reads from the
// target at each topic sync) so that the status and the operator's work stay small
// however many consumer groups match spec.groups.
const MaxGroupStatuses = 100

// GroupsStatus summarises the consumer-group checkpoints of spec.groups, as the
// operator read them from the target cluster at its last topic sync.
type GroupsStatus struct {
	// selected is the number of source consumer groups matching spec.groups.include
	// and not spec.groups.exclude.
	// +optional
	Selected int32 `json:"selected"`

	// checkpointed is the number of listed groups (the first 100 by name) in state
	// Checkpointed.
	// +optional
	Checkpointed int32 `json:"checkpointed"`

	// skipped is the number of listed groups in state Skipped (the target group has
	// active members).
	// +optional
	Skipped int32 `json:"skipped"`

	// pending is the number of listed groups in state Pending (no checkpoint yet).
	// +optional
	Pending int32 `json:"pending"`

	// items lists the selected groups (the first 100 by name) with their last
	// checkpoint.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Items []GroupStatus `json:"items,omitempty"`
}

// GroupCheckpointState says where one group's checkpoints stand.
type GroupCheckpointState string

// Group checkpoint states.
const (
	// GroupStateCheckpointed means the mirror committed translated offsets to the
	// target group and the group has no active members: its consumers can move to the
	// target and resume there.
	GroupStateCheckpointed GroupCheckpointState = "Checkpointed"
	// GroupStateSkipped means the target group has active members: the mirror never
	// moves a live group, so its offsets are left to its consumers.
	GroupStateSkipped GroupCheckpointState = "Skipped"
	// GroupStatePending means the mirror has committed no checkpoint to the target
	// group yet; reason says why as far as the operator can tell.
	GroupStatePending GroupCheckpointState = "Pending"
)

// Reasons of a group's state.
const (
	// GroupReasonCheckpointed goes with GroupStateCheckpointed.
	GroupReasonCheckpointed = "Checkpointed"
	// GroupReasonTargetGroupActive goes with GroupStateSkipped.
	GroupReasonTargetGroupActive = "TargetGroupActive"
	// GroupReasonNoSourceOffsets: the source group has committed no offset of a
	// mirrored topic, so there is nothing to translate.
	GroupReasonNoSourceOffsets = "NoSourceOffsets"
	// GroupReasonNoOffsetSyncs: the mirror has written no offset sync to the target
	// yet (it is not running, or has mirrored nothing), so nothing can be translated.
	GroupReasonNoOffsetSyncs = "NoOffsetSyncs"
	// GroupReasonNotCheckpointed: the source group has offsets and the mirror writes
	// offset syncs, but no checkpoint reached the target group yet: no sync at or
	// below the group's offsets yet, the first groups.syncInterval has not passed, or
	// the target group's own consumers are further (the mirror never moves it back).
	GroupReasonNotCheckpointed = "NotCheckpointed"
)

// GroupStatus is the checkpoint state of one selected source consumer group, read from
// the target group of the same name.
type GroupStatus struct {
	// name is the source consumer group, and the target group its offsets are
	// translated to.
	// +required
	Name string `json:"name"`

	// state is Checkpointed, Skipped or Pending.
	// +optional
	State GroupCheckpointState `json:"state,omitempty"`

	// reason is a PascalCase reason for state: Checkpointed, TargetGroupActive,
	// NoSourceOffsets, NoOffsetSyncs or NotCheckpointed.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message explains state for people.
	// +optional
	Message string `json:"message,omitempty"`

	// partitionsTranslated is the number of the target group's partitions whose
	// committed offset the mirror's last checkpoint put there.
	// +optional
	PartitionsTranslated int32 `json:"partitionsTranslated"`

	// lastCheckpointTime is when the mirror last committed (or renewed) a translated
	// offset of the group, the newest over its partitions; the checkpoint's age is now
	// minus this. The mirror renews unchanged offsets every groups.syncInterval, so an
	// age well past it means the checkpoints stopped. Absent before the first.
	// +optional
	LastCheckpointTime *metav1.Time `json:"lastCheckpointTime,omitempty"`

	// activeMembers is the number of members of the target group.
	// +optional
	ActiveMembers int32 `json:"activeMembers,omitempty"`
}
