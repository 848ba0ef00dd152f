package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KafkaMirror mirrors Kafka topics from a source cluster to a target cluster without
// losing data. The operator keeps the target topics' partition counts equal to the
// source's and runs the mirror engine as a Deployment.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=km;kmirror,categories=kafka
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source.bootstrapServers[0]`,description="First source bootstrap server"
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.bootstrapServers[0]`,description="First target bootstrap server"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`,description="Mirror pods running (observed)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the mirror is running and its topics are in sync"
// +kubebuilder:printcolumn:name="Topics",type=integer,JSONPath=`.status.topics.selected`,description="Source topics selected for mirroring"
// +kubebuilder:printcolumn:name="In Sync",type=integer,JSONPath=`.status.topics.inSync`,priority=1,description="Topics whose target partition count matches the source"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the mirror is or is not ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.initialPositions) || self.spec.initialPositions.fromFailover != self.metadata.name",message="initialPositions.fromFailover names this KafkaMirror itself: name the KafkaMirror that failed over into this one's source cluster",fieldPath=".spec.initialPositions.fromFailover"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 48",message="metadata.name must be at most 48 characters, so that the names of the mirror's Deployment and Service stay within 63"
type KafkaMirror struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares what to mirror, from where to where, and how.
	// +required
	Spec KafkaMirrorSpec `json:"spec"`

	// status is what the operator observed: conditions, replicas, and the state of
	// every selected topic.
	// +optional
	Status KafkaMirrorStatus `json:"status,omitempty"`
}

// KafkaMirrorList is a list of KafkaMirrors.
//
// +kubebuilder:object:root=true
type KafkaMirrorList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KafkaMirrors.
	Items []KafkaMirror `json:"items"`
}

// KafkaMirrorSpec declares one mirror. Fields that also exist in the engine's config
// file (mirror.yaml) have the same name there, so spec.X is config X.
//
// +kubebuilder:validation:XValidation:rule="!self.source.bootstrapServers.exists(s, self.target.bootstrapServers.exists(t, s.lowerAscii() == t.lowerAscii())) || (has(self.topics.rename) && ((has(self.topics.rename.prefix) && size(self.topics.rename.prefix) > 0) || (has(self.topics.rename.template) && size(self.topics.rename.template) > 0 && self.topics.rename.template != '{topic}') || (has(self.topics.rename.stripPrefix) && size(self.topics.rename.stripPrefix) > 0)))",message="source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template"
// +kubebuilder:validation:XValidation:rule="has(self.consumerGroup) == has(oldSelf.consumerGroup) && (!has(self.consumerGroup) || self.consumerGroup == oldSelf.consumerGroup)",message="consumerGroup is immutable: it cannot be set, changed or removed after creation, because the mirror's committed offsets live in that group"
// +kubebuilder:validation:XValidation:rule="!has(self.groups) || !has(self.partitioning) || self.partitioning == 'preserve'",message="groups (consumer-group offset translation) needs partitioning: preserve; hash and roundRobin move records to other partitions, so source offsets have no target offsets"
// +kubebuilder:validation:XValidation:rule="!has(self.groups) || !has(self.handlers) || self.handlers.all(h, !has(h.name) || size(h.name) == 0)",message="groups (consumer-group offset translation) needs one target record per source record; a named handler may fan a record out"
// +kubebuilder:validation:XValidation:rule="!has(self.delivery) || self.delivery != 'exactlyOnce' || !has(self.partitioning) || self.partitioning == 'preserve'",message="delivery exactlyOnce needs partitioning preserve: its transactions and fencing are per source partition"
// +kubebuilder:validation:XValidation:rule="!has(self.delivery) || self.delivery != 'exactlyOnce' || !has(self.handlers) || self.handlers.all(h, !has(h.name) || size(h.name) == 0)",message="delivery exactlyOnce allows CEL handlers only: a named handler may fan a record out"
// +kubebuilder:validation:XValidation:rule="!has(self.transactionInterval) || !has(self.offsetCommitInterval) || duration(self.transactionInterval) <= duration(self.offsetCommitInterval)",message="transactionInterval must be at most offsetCommitInterval"
// +kubebuilder:validation:XValidation:rule="has(self.initialPositions) == has(oldSelf.initialPositions) && (!has(self.initialPositions) || self.initialPositions == oldSelf.initialPositions)",message="initialPositions is immutable: it can only be given at creation, because a mirror that already ran starts from its own progress",fieldPath=".initialPositions"
// +kubebuilder:validation:XValidation:rule="!has(self.initialPositions) || (has(self.provenance) && has(self.provenance.enabled) && self.provenance.enabled)",message="initialPositions.fromFailover needs provenance.enabled: true, so that records mirrored back cannot loop to the cluster they came from",fieldPath=".provenance.enabled"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.failover) || has(self.failover)",message="failover cannot be removed once set: a failed-over mirror stays stopped, since its consumers and producers may already use the target; to mirror again create a new KafkaMirror (or a reverse one)"
type KafkaMirrorSpec struct {
	// source is the cluster records are read from.
	// +required
	Source ClusterSpec `json:"source"`

	// target is the cluster records are written to.
	// +required
	Target ClusterSpec `json:"target"`

	// consumerGroup is the source consumer group whose committed offsets record the
	// mirror's progress. Default: kafka-mirror.<namespace>.<name>; the group in use is
	// shown in status.consumerGroup. Immutable: it can only be given at creation.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	ConsumerGroup string `json:"consumerGroup,omitempty"`

	// topics selects the source topics to mirror and names their targets.
	// +required
	Topics TopicsSpec `json:"topics"`

	// partitioning chooses the target partition of each record: preserve (source
	// partition p goes to target partition p), hash (by key) or roundRobin.
	// Default preserve.
	// +optional
	// +kubebuilder:default=preserve
	Partitioning Partitioning `json:"partitioning,omitempty"`

	// syncPartitions makes the operator create missing target topics with the source's
	// partition count and add partitions to a target topic when its source grew.
	// A target with more partitions than its source is reported, never changed.
	// Default true.
	// +optional
	// +kubebuilder:default=true
	SyncPartitions *bool `json:"syncPartitions,omitempty"`

	// syncTopicConfigs copies the configs set on each source topic (retention, cleanup
	// policy, ...) to its target, when the operator creates it and again whenever the
	// source's value changes, except those matched by topics.configExclude. Configs the
	// target refuses are reported in status.topics.items[].message and the rest are
	// still applied. Default true; false leaves target topic configs alone.
	// +optional
	SyncTopicConfigs *bool `json:"syncTopicConfigs,omitempty"`

	// topicSyncInterval is how often the operator re-reads the source topics to find new
	// matching topics and partition expansion, as a duration string ("30s", "5m").
	// Default 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="topicSyncInterval must be a duration of at least 1s, such as 30s or 5m"
	TopicSyncInterval *metav1.Duration `json:"topicSyncInterval,omitempty"`

	// noDataLoss turns on the no-data-loss policy: producer acks=all and idempotence,
	// a source offset is committed only after the target acked every record up to it,
	// and a send that finally fails stops the engine instead of being skipped.
	// Default true.
	// +optional
	// +kubebuilder:default=true
	NoDataLoss *bool `json:"noDataLoss,omitempty"`

	// handlers is an ordered chain of message handlers applied to every record: CEL
	// filters and transforms, or handlers registered in the engine by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Handlers []HandlerSpec `json:"handlers,omitempty"`

	// rebalanceListener is a registered listener called when partitions are assigned
	// to or released from a stream, after the built-in drain and commit.
	// +optional
	RebalanceListener *PluginSpec `json:"rebalanceListener,omitempty"`

	// streams is the number of consumer-group members in each mirror pod, from 1 to 64.
	// Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 64",message="streams must be between 1 and 64"
	Streams int32 `json:"streams,omitempty"`

	// replicas is the number of mirror pods. 0 stops mirroring (as does paused).
	// Default 1. Changed by `kubectl scale` through the scale subresource.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="replicas must be 0 or more"
	Replicas *int32 `json:"replicas,omitempty"`

	// paused stops mirroring without deleting anything: the Deployment is scaled to 0,
	// each pod drains (waits for its in-flight records to be acked and commits) before
	// it exits, so resuming gives no duplicates. Default false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// failover fails the mirror over to its target cluster (docs/failover.md): the
	// operator scales the mirror to 0 (its pods drain and commit), then runs
	// `kafka-mirror failover` as the Job <name>-failover and reports in
	// status.failover. It cannot be changed or removed once set: a failed-over mirror
	// stays stopped, since consumers and producers may already use the target; to
	// mirror again create a new KafkaMirror, or a reverse one.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="failover is immutable once set: a failed-over mirror stays stopped; to mirror again create a new KafkaMirror (or a reverse one)"
	Failover *FailoverSpec `json:"failover,omitempty"`

	// offsetCommitInterval is how often acked source offsets are committed, as a
	// duration string. Default 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="offsetCommitInterval must be a positive duration such as 5s"
	OffsetCommitInterval *metav1.Duration `json:"offsetCommitInterval,omitempty"`

	// deliveryTimeout bounds how long one record may be retried towards the target
	// before the engine stops with an error (and restarts from its last commit), as a
	// duration string. Default 2m.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="deliveryTimeout must be a positive duration such as 2m"
	DeliveryTimeout *metav1.Duration `json:"deliveryTimeout,omitempty"`

	// maxInFlightPerPartition bounds the records read but not yet acked, per source
	// partition, so memory stays flat when the target is slow. Default 10000 records.
	// Each mirror pod holds at most 32768 in all (or this value, when larger).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxInFlightPerPartition int32 `json:"maxInFlightPerPartition,omitempty"`

	// maxInFlightBytes bounds the bytes (key, value and headers) of records read but not
	// yet acked, per mirror pod, together with maxInFlightPerPartition, so large records
	// cannot fill the pod's memory. Default: a quarter of the container's memory limit
	// when one is set, else 256 MiB.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxInFlightBytes int64 `json:"maxInFlightBytes,omitempty"`

	// initialOffset is where a source partition starts when neither the source group nor
	// the target-side progress knows how far it was mirrored: oldest (every record the
	// source still holds) or latest (only records written from now on). Default oldest.
	// +optional
	// +kubebuilder:validation:Enum=oldest;latest
	InitialOffset string `json:"initialOffset,omitempty"`

	// initialPositions starts the partitions this mirror has no progress of from a
	// completed failover (a failback, docs/failover.md): at the failed-over mirror's
	// failback points, the end offsets its target had at the cutover, so that exactly
	// the records written there since flow back. Needs spec.provenance.enabled. It can
	// only be given at creation: a mirror that already runs has progress of its own.
	// +optional
	InitialPositions *InitialPositionsSpec `json:"initialPositions,omitempty"`

	// producer tunes the producer that writes to the target.
	// +optional
	Producer *ProducerSpec `json:"producer,omitempty"`

	// consumer tunes the fetches from the source.
	// +optional
	Consumer *ConsumerSpec `json:"consumer,omitempty"`

	// logLevel is the mirror engine's log level: debug, info, warn or error. Default info.
	// +optional
	// +kubebuilder:validation:Enum=debug;info;warn;error
	LogLevel string `json:"logLevel,omitempty"`

	// groups turns on consumer-group offset translation, so consumers can fail over to
	// the target: the engine records where source records landed on the target (in the
	// compacted topic __kafka-mirror.offset-syncs.<consumerGroup> there), translates the
	// committed offsets of the matching source consumer groups and commits them to the
	// groups of the same name on the target, only while those have no active members and
	// never backwards. Needs partitioning preserve and no named handler. Default: unset,
	// no translation.
	// +optional
	Groups *GroupsSpec `json:"groups,omitempty"`
	// delivery is the guarantee a read_committed consumer of the target gets:
	// atLeastOnce (a crash may re-send what was not yet committed) or exactlyOnce
	// (records and source offsets are written in one target transaction per source
	// partition, so every source record is seen exactly once across crashes, rebalances
	// and target outages; needs partitioning preserve and CEL handlers only; see
	// docs/exactly-once.md). Default atLeastOnce.
	// +optional
	// +kubebuilder:validation:Enum=atLeastOnce;exactlyOnce
	Delivery string `json:"delivery,omitempty"`

	// transactionInterval is how long one exactlyOnce transaction collects a source
	// partition's records before it is committed (the latency read_committed consumers
	// see), as a duration string; at most offsetCommitInterval. Default 100ms; used only
	// with delivery exactlyOnce.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="transactionInterval must be a positive duration such as 100ms"
	TransactionInterval *metav1.Duration `json:"transactionInterval,omitempty"`

	// pod customises the mirror pods: image, resources and scheduling.
	// +optional
	Pod MirrorPodSpec `json:"pod,omitempty"`

	// rack makes the mirror fetch from source replicas in its own zone (brokers with
	// follower fetching, KIP-392): cheaper cross-zone traffic, no change to what is
	// mirrored.
	// +optional
	Rack *RackSpec `json:"rack,omitempty"`

	// childMetadata adds labels and annotations to the Deployment, Service, ConfigMap
	// and PodDisruptionBudget (spec.pod.labels and annotations go on the pods).
	// +optional
	ChildMetadata *ChildMetadata `json:"childMetadata,omitempty"`

	// provenance turns on loop prevention for active-active mirroring: every mirrored
	// record carries a header naming the clusters it came through, and records that
	// came from the target cluster are dropped. Two KafkaMirrors that mirror the same
	// topic names between two clusters in both directions are admitted only when both
	// have it on. Default: off.
	// +optional
	Provenance *ProvenanceSpec `json:"provenance,omitempty"`

	// autoscaling lets the operator set the number of mirror pods from the consumer
	// group's lag: enough replicas to take the inflow and work off the lag within
	// targetCatchUp, at the drain rate per replica it measured (docs/autoscaling.md).
	// With it, spec.replicas (and so `kubectl scale`) is ignored; spec.paused still
	// wins. Not together with a HorizontalPodAutoscaler (or KEDA's) on this KafkaMirror
	// or its Deployment: the operator refuses that pair (Stalled, AutoscalerConflict).
	// Default: off.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`
}

// MaxAutoscalingReplicas caps spec.autoscaling.maxReplicas.
const MaxAutoscalingReplicas = 256

// AutoscalingSpec configures lag-driven autoscaling of the mirror pods.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must be at most autoscaling.maxReplicas"
type AutoscalingSpec struct {
	// minReplicas is the fewest mirror pods, from 1. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most mirror pods, from 1 to 256. The operator also never asks
	// for more pods than the source partitions can keep busy: replicas x streams stays
	// at most the number of partitions of the selected topics (rounded up to a pod).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCatchUp is how soon the lag should be worked off, as a duration string: the
	// operator asks for the replicas that drain (inflow + lag / targetCatchUp) records
	// per second. At least 10s. Default 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('10s')",message="autoscaling.targetCatchUp must be a duration of at least 10s, such as 5m"
	TargetCatchUp *metav1.Duration `json:"targetCatchUp,omitempty"`

	// scaleUpStabilization is how long a higher replica count must be recommended
	// before the operator scales up to it (the lowest recommendation of the window
	// wins), as a duration string. Default 0s: scale up at once.
	// +optional
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) <= duration('1h')",message="autoscaling.scaleUpStabilization must be a duration of at most 1h, such as 0s or 30s"
	ScaleUpStabilization *metav1.Duration `json:"scaleUpStabilization,omitempty"`

	// scaleDownStabilization is how long the operator waits before scaling down: it
	// scales to the highest replica count recommended within this window, as a
	// duration string. Default 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) <= duration('1h')",message="autoscaling.scaleDownStabilization must be a duration of at most 1h, such as 5m"
	ScaleDownStabilization *metav1.Duration `json:"scaleDownStabilization,omitempty"`
}

// GroupsSpec selects the source consumer groups whose offsets are translated to the
// target.
type GroupsSpec struct {
	// include lists regular expressions; a source consumer group is translated when its
	// whole name matches one of them.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Include []string `json:"include"`

	// exclude lists regular expressions that win over include. The mirror's own
	// consumerGroup is never translated.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Exclude []string `json:"exclude,omitempty"`

	// syncInterval is how often the groups' offsets are translated and committed to the
	// target, as a duration string. Default 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s')",message="groups.syncInterval must be a duration of at least 1s, such as 30s"
	SyncInterval *metav1.Duration `json:"syncInterval,omitempty"`
}

// ProvenanceSpec configures loop prevention for active-active mirroring. The header's
// value is the comma-separated list of the ids of the clusters the record was mirrored
// from, oldest first (Kafka's cluster ids); its length is the record's hop count.
//
// +kubebuilder:validation:XValidation:rule="!has(self.sourceName) || !has(self.targetName) || self.sourceName != self.targetName",message="provenance.targetName must differ from provenance.sourceName: the names tell the clusters apart"
type ProvenanceSpec struct {
	// enabled turns loop prevention on. Default false.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// header is the name of the provenance header. Default kafka-mirror-provenance.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	Header string `json:"header,omitempty"`

	// maxHops is the most mirrors a record may pass through, from 1 to 100: a record
	// that already went through maxHops mirrors is dropped. Default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxHops int32 `json:"maxHops,omitempty"`

	// strip leaves the header off the records written to the target (incoming records
	// are still checked). Only for a mirror whose target is not mirrored onwards: a
	// record without the header cannot be recognised when it comes back. Default false.
	// +optional
	Strip bool `json:"strip,omitempty"`

	// sourceName is the source cluster's id for brokers that do not report one (before
	// Kafka 0.10.1). Default: unset, the id the cluster reports.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	SourceName string `json:"sourceName,omitempty"`

	// targetName is the target cluster's id for brokers that do not report one. It must
	// equal the name the mirror in the other direction uses for this cluster. Default:
	// unset, the id the cluster reports.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	TargetName string `json:"targetName,omitempty"`
}

// ProducerSpec tunes the producer that writes to the target.
type ProducerSpec struct {
	// maxMessageBytes replaces, for every target topic, the size limit of one record
	// batch that the engine otherwise reads from the target (each topic's
	// max.message.bytes, else the broker's message.max.bytes), in bytes. Set it when the
	// mirror may not describe the target's configs, or to send smaller batches. Default:
	// unset, the target's own limits.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxMessageBytes int32 `json:"maxMessageBytes,omitempty"`

	// compression is the codec of the batches written to the target. Default none (the
	// engine's size checks count uncompressed bytes; lz4 saves cross-zone bytes for
	// little CPU).
	// +optional
	// +kubebuilder:validation:Enum=none;gzip;snappy;lz4;zstd
	Compression string `json:"compression,omitempty"`

	// flushFrequency sends a batch at least this often, as a duration string. Default:
	// as soon as the previous request to that broker is answered; 5ms when flushBytes or
	// flushMessages is set (a batch below them is sent only on the frequency).
	// +optional
	FlushFrequency *metav1.Duration `json:"flushFrequency,omitempty"`

	// flushBytes sends a batch once it holds this many bytes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=104792064
	FlushBytes int32 `json:"flushBytes,omitempty"`

	// flushMessages sends a batch once it holds this many records.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FlushMessages int32 `json:"flushMessages,omitempty"`

	// producers is the number of batching producers, each with its own connections,
	// that share the mirrored partitions: every source partition's records go through
	// one of them, so order and idempotence hold, and each target broker sees up to this
	// many requests in flight rather than one. A far target needs them; 1 sends
	// everything through one producer (a little less CPU and memory on a near target).
	// Ignored with delivery exactlyOnce. Default 8, at most 16.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 16",message="producer.producers must be between 1 and 16"
	Producers int32 `json:"producers,omitempty"`

	// maxInFlightRequests is the most record batches per target partition in flight,
	// 1 to 5. Above 1 each batching producer keeps that many idempotent batches per
	// partition in flight (the engine's own produce path, as Kafka's Java producer),
	// so a far target moves several batches per round trip; 1 keeps sarama's
	// idempotent producers, one request per broker in flight. Ignored with delivery
	// exactlyOnce or noDataLoss false. Default 5.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 5",message="producer.maxInFlightRequests must be between 1 and 5"
	MaxInFlightRequests int32 `json:"maxInFlightRequests,omitempty"`
}

// ConsumerSpec tunes the fetches from the source.
type ConsumerSpec struct {
	// fetchMinBytes is how many bytes a fetch waits for (up to fetchMaxWait). Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FetchMinBytes int32 `json:"fetchMinBytes,omitempty"`

	// fetchPartitionBytes is how many bytes a fetch asks for per partition. Default: by
	// the source's round trip measured at start, 1 MiB per 25 ms, from 1 MiB to 8 MiB.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FetchPartitionBytes int32 `json:"fetchPartitionBytes,omitempty"`

	// fetchMaxWait is how long the broker may wait for fetchMinBytes, at most 10s.
	// Default 500ms.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) <= duration('10s')",message="consumer.fetchMaxWait must be a duration of at most 10s, such as 500ms"
	FetchMaxWait *metav1.Duration `json:"fetchMaxWait,omitempty"`
}

// ClusterSpec says how to reach one Kafka cluster. Credentials come from Secrets in
// the KafkaMirror's namespace, mounted into the mirror pods as files.
type ClusterSpec struct {
	// bootstrapServers lists host:port addresses of brokers to bootstrap from.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="bootstrapServers must list at least one host:port"
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.matches('^([^:\\\\s\\\\[\\\\]]+|\\\\[[0-9a-fA-F:.]+\\\\]):[0-9]{1,5}$'))",message="each bootstrap server must be host:port, for example kafka:9092"
	BootstrapServers []string `json:"bootstrapServers"`

	// clientId is the Kafka client id the mirror uses towards this cluster (it shows in
	// broker logs and quotas). Default kafka-mirror.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ClientID string `json:"clientId,omitempty"`

	// tls turns on TLS towards this cluster; an empty object uses the system CAs.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// sasl turns on SASL authentication towards this cluster.
	// +optional
	SASL *SASLSpec `json:"sasl,omitempty"`
}

// TLSSpec configures TLS towards a cluster.
type TLSSpec struct {
	// caSecretRef names a Secret key holding PEM CA certificates to trust instead of the
	// system CAs. The key defaults to ca.crt.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`

	// caSecretRefs names more Secret keys holding PEM CA certificates, trusted alongside
	// caSecretRef: during a CA rotation the old and the new CA are trusted side by side.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	CASecretRefs []SecretKeyReference `json:"caSecretRefs,omitempty"`

	// certSecretRef names a Secret whose certificate and key the mirror presents for
	// mutual TLS: a kubernetes.io/tls Secret (keys tls.crt and tls.key) by default, or any
	// Secret with other key names, such as a Strimzi KafkaUser's (user.crt, user.key).
	// +optional
	CertSecretRef *CertSecretReference `json:"certSecretRef,omitempty"`

	// insecureSkipVerify disables verification of the brokers' certificates. For tests
	// only: it allows a man in the middle. Default false.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// SASLMechanism is a SASL mechanism the mirror can authenticate with.
//
// +kubebuilder:validation:Enum=PLAIN;SCRAM-SHA-256;SCRAM-SHA-512;OAUTHBEARER;AWS_MSK_IAM
type SASLMechanism string

// SASL mechanisms.
const (
	// SASLPlain sends the password as it is; use it only over TLS.
	SASLPlain SASLMechanism = "PLAIN"
	// SASLSCRAMSHA256 is SCRAM with SHA-256.
	SASLSCRAMSHA256 SASLMechanism = "SCRAM-SHA-256"
	// SASLSCRAMSHA512 is SCRAM with SHA-512.
	SASLSCRAMSHA512 SASLMechanism = "SCRAM-SHA-512"
	// SASLOAuthBearer authenticates with OAuth 2.0 access tokens from a client
	// credentials grant.
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
	// SASLAWSMSKIAM is Amazon MSK's IAM access control, with the pod's AWS identity.
	SASLAWSMSKIAM SASLMechanism = "AWS_MSK_IAM"
)

// SASLSpec configures SASL authentication towards a cluster.
//
// +kubebuilder:validation:XValidation:rule="self.mechanism in ['OAUTHBEARER', 'AWS_MSK_IAM'] || has(self.passwordSecretRef)",message="sasl.passwordSecretRef is required: the SASL password is read from a Secret, never written in the KafkaMirror"
// +kubebuilder:validation:XValidation:rule="self.mechanism in ['OAUTHBEARER', 'AWS_MSK_IAM'] || (has(self.username) && size(self.username) > 0)",message="sasl.username is required for PLAIN and SCRAM"
// +kubebuilder:validation:XValidation:rule="self.mechanism != 'OAUTHBEARER' || has(self.oauth)",message="sasl.oauth is required for OAUTHBEARER"
// +kubebuilder:validation:XValidation:rule="self.mechanism != 'AWS_MSK_IAM' || has(self.aws)",message="sasl.aws is required for AWS_MSK_IAM"
type SASLSpec struct {
	// mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (OAuth 2.0 client
	// credentials) or AWS_MSK_IAM (Amazon MSK with the pod's AWS identity).
	// +required
	Mechanism SASLMechanism `json:"mechanism"`

	// username is the SASL user name (PLAIN and SCRAM).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Username string `json:"username,omitempty"`

	// passwordSecretRef names the Secret key holding the SASL password (PLAIN and
	// SCRAM). The key defaults to password.
	// +optional
	PasswordSecretRef *SecretKeyReference `json:"passwordSecretRef,omitempty"`

	// oauth is the OAuth 2.0 client whose access tokens authenticate the mirror
	// (OAUTHBEARER).
	// +optional
	OAuth *OAuthSpec `json:"oauth,omitempty"`

	// aws configures AWS_MSK_IAM.
	// +optional
	AWS *AWSSpec `json:"aws,omitempty"`
}

// OAuthSpec is an OAuth 2.0 client credentials grant. Tokens are fetched again a minute
// before they expire.
type OAuthSpec struct {
	// tokenUrl is the token endpoint.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/\s]+`
	TokenURL string `json:"tokenUrl"`

	// clientId is the OAuth client id.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ClientID string `json:"clientId"`

	// clientSecretRef names the Secret key holding the client secret. The key defaults
	// to client-secret.
	// +required
	ClientSecretRef SecretKeyReference `json:"clientSecretRef"`

	// scopes are requested with the token.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Scopes []string `json:"scopes,omitempty"`

	// extensions are SASL extensions sent with the token (KIP-342), such as
	// logicalCluster and identityPoolId for Confluent Cloud.
	// +optional
	Extensions map[string]string `json:"extensions,omitempty"`
}

// AWSSpec configures Amazon MSK IAM authentication. Credentials come from the pod's
// identity: IRSA (a ServiceAccount annotated with eks.amazonaws.com/role-arn, set as
// spec.pod.serviceAccountName) or EKS Pod Identity.
type AWSSpec struct {
	// region is the MSK cluster's AWS region.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	Region string `json:"region"`

	// roleArn is a role assumed with the pod's credentials before signing. Default:
	// none, the pod's own role signs.
	// +optional
	// +kubebuilder:validation:Pattern=`^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$`
	RoleARN string `json:"roleArn,omitempty"`
}

// SecretKeyReference names one key of a Secret in the KafkaMirror's namespace.
type SecretKeyReference struct {
	// name is the Secret's name, in the KafkaMirror's own namespace (a reference cannot
	// name another namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key is the key within the Secret. Default: password for a SASL password, ca.crt
	// for a CA bundle.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// CertSecretReference names a Secret holding a PEM client certificate and its key.
type CertSecretReference struct {
	// name is the Secret's name, in the KafkaMirror's own namespace (a reference cannot
	// name another namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// certKey is the key holding the PEM certificate (chain). Default tls.crt.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	CertKey string `json:"certKey,omitempty"`

	// keyKey is the key holding the PEM private key. Default tls.key.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	KeyKey string `json:"keyKey,omitempty"`
}

// TopicsSpec selects source topics and names their targets.
type TopicsSpec struct {
	// include lists regular expressions (Go RE2 syntax); a source topic is mirrored
	// when its whole name matches one of them.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=1024
	Include []string `json:"include"`

	// exclude lists regular expressions that win over include. Internal topics (named
	// __*) are never mirrored.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=1024
	Exclude []string `json:"exclude,omitempty"`

	// rename maps a source topic name to its target name. Default: the same name.
	// +optional
	Rename *RenameSpec `json:"rename,omitempty"`

	// replicationFactor is the replication factor of the target topics the operator
	// creates. Unset or -1: the source topic's replication factor, capped at the number
	// of target brokers. A number from 1 is used as it is (a target with fewer brokers
	// refuses the topic). Existing target topics are never changed.
	// +optional
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=32767
	// +kubebuilder:validation:XValidation:rule="self != 0",message="replicationFactor must be at least 1, or -1 for the source topic's"
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`

	// configExclude lists regular expressions (Go RE2 syntax) of topic config names that
	// syncTopicConfigs never copies; a config is excluded when its whole name matches one
	// of them. Setting the list replaces the default, which leaves out what depends on
	// the target cluster rather than the data: min.insync.replicas,
	// unclean.leader.election.enable, replication throttles, message.timestamp.* and
	// tiered or removed storage settings (the README lists it). [""] copies every config.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=1024
	ConfigExclude []string `json:"configExclude,omitempty"`
}

// RenameSpec maps source topic names to target topic names. Set at most one field.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.prefix) && size(self.prefix) > 0 && has(self.template) && size(self.template) > 0)",message="set rename.prefix or rename.template, not both"
// +kubebuilder:validation:XValidation:rule="!(has(self.stripPrefix) && size(self.stripPrefix) > 0 && ((has(self.prefix) && size(self.prefix) > 0) || (has(self.template) && size(self.template) > 0)))",message="set one of rename.prefix, rename.template and rename.stripPrefix"
type RenameSpec struct {
	// prefix is put in front of the source topic name, for example "dc1.".
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]*$`
	Prefix string `json:"prefix,omitempty"`

	// template is the target name with {topic} standing for the source topic name, for
	// example "dc1.{topic}.mirror".
	// +optional
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:XValidation:rule="self.contains('{topic}')",message="rename.template must contain {topic}, or every source topic would map to one target topic"
	Template string `json:"template,omitempty"`

	// stripPrefix is removed from the front of the source topic name: the reverse of
	// prefix, for a failback mirror ("dc1." maps dc1.orders back to orders). Only
	// topics that start with it (and are longer) are mirrored; another topic that
	// topics.include matches is not.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]*$`
	StripPrefix string `json:"stripPrefix,omitempty"`
}

// Partitioning chooses the target partition of a record.
//
// +kubebuilder:validation:Enum=preserve;hash;roundRobin
type Partitioning string

// Partitioning strategies.
const (
	// PartitioningPreserve writes source partition p to target partition p.
	PartitioningPreserve Partitioning = "preserve"
	// PartitioningHash chooses the target partition by hashing the record key.
	PartitioningHash Partitioning = "hash"
	// PartitioningRoundRobin spreads records over the target partitions in turn.
	PartitioningRoundRobin Partitioning = "roundRobin"
)

// HandlerSpec is one step of the handler chain: exactly one of cel or name is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.cel) != (has(self.name) && size(self.name) > 0)",message="set either cel or name in each handler"
// +kubebuilder:validation:XValidation:rule="!has(self.cel) || !has(self.args) || size(self.args) == 0",message="args are for named handlers; a cel handler takes none"
type HandlerSpec struct {
	// cel is a filter and/or transform written in CEL. Expressions see `record` with
	// fields topic, partition, offset, timestamp, key, value and headers.
	// +optional
	CEL *CELHandler `json:"cel,omitempty"`

	// name selects a handler registered in the engine's handler registry.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// args are passed to the named handler's factory.
	// +optional
	Args map[string]string `json:"args,omitempty"`
}

// OnError is what a CEL handler does when its evaluation fails at run time.
//
// +kubebuilder:validation:Enum=fail;skip
type OnError string

// OnError policies.
const (
	// OnErrorFail stops the engine without committing past the record.
	OnErrorFail OnError = "fail"
	// OnErrorSkip drops the record, counts it as skipped and goes on.
	OnErrorSkip OnError = "skip"
)

// CELHandler is a handler written in CEL.
//
// +kubebuilder:validation:XValidation:rule="(has(self.filter) && size(self.filter) > 0) || has(self.transform)",message="a cel handler needs a filter and/or a transform"
type CELHandler struct {
	// filter is a boolean expression; false drops the record. Example:
	// "!('skip' in record.headers)".
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Filter string `json:"filter,omitempty"`

	// transform rewrites parts of the record; parts without an expression stay unchanged.
	// +optional
	Transform *CELTransform `json:"transform,omitempty"`

	// onError is fail (stop the engine without committing past the record) or skip
	// (drop the record and count it). Default fail.
	// +optional
	// +kubebuilder:default=fail
	OnError OnError `json:"onError,omitempty"`
}

// CELTransform holds one optional CEL expression per record part.
type CELTransform struct {
	// key is an expression giving the new key (bytes, string or null).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Key string `json:"key,omitempty"`
	// value is an expression giving the new value (bytes, string or null).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
	// headers is an expression giving the new headers (a map or a list of pairs).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Headers string `json:"headers,omitempty"`
	// topic is an expression giving the new topic name (before topics.rename applies).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Topic string `json:"topic,omitempty"`
	// partition is an expression giving the new target partition.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Partition string `json:"partition,omitempty"`
}

// PluginSpec names a plugin registered in the engine and its arguments.
type PluginSpec struct {
	// name selects the plugin in its registry.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// args are passed to the plugin's factory.
	// +optional
	Args map[string]string `json:"args,omitempty"`
}

// MirrorPodSpec customises the mirror pods.
type MirrorPodSpec struct {
	// image overrides the mirror image. Default: the operator's own image (one image
	// holds both operator and engine).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// imagePullPolicy is Always, IfNotPresent or Never. Default: Kubernetes' default
	// for the image's tag.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// imagePullSecrets name Secrets used to pull the image.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// resources are the mirror container's CPU and memory requests and limits.
	// Default: none set.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector restricts the mirror pods to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the mirror pods run on tainted nodes.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity is the mirror pods' scheduling affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// priorityClassName is the mirror pods' priority class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// serviceAccountName is the service account the mirror pods run as. Default: the
	// namespace's default service account (the engine needs no Kubernetes API access,
	// so its token is not mounted).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// labels are added to the mirror pods (selector labels set by the operator win).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the mirror pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// topologySpreadConstraints spread the mirror pods over zones or nodes.
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// env adds environment variables to the mirror container (proxy settings, GODEBUG,
	// ...). Kafka credentials belong in the Secrets the cluster specs reference.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`

	// volumes adds volumes to the mirror pods, mounted with volumeMounts. The names
	// config and tmp, and names starting with source- or target-, are the operator's.
	// +optional
	// +listType=atomic
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// volumeMounts mounts volumes into the mirror container; not at /tmp or under
	// /etc/kafka-mirror, which are the operator's.
	// +optional
	// +listType=atomic
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// podSecurityContext replaces the pods' security context. Default: runAsNonRoot,
	// user, group and fsGroup 65532, the RuntimeDefault seccomp profile. On OpenShift's
	// restricted-v2, set it without IDs ({runAsNonRoot: true, seccompProfile: {type:
	// RuntimeDefault}}) to let the platform assign them.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// securityContext replaces the mirror container's security context. Default: no
	// privilege escalation, read-only root file system, runAsNonRoot, all capabilities
	// dropped, the RuntimeDefault seccomp profile.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// terminationGracePeriodSeconds is how long a stopping pod may drain. Default:
	// deliveryTimeout + 30 s, so the engine can wait for its in-flight records and commit.
	// Values below deliveryTimeout are refused: the pod would be killed mid-drain.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// RackSpec says where a mirror pod's rack (zone) comes from.
type RackSpec struct {
	// topologyKey is the pod label holding the zone, read through the downward API when
	// the pod starts. Default topology.kubernetes.io/zone, which Kubernetes (1.35+,
	// PodTopologyLabels admission) copies from the node onto every pod; another key must
	// be put on the pods by other means. A pod without the label fetches from leaders.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	TopologyKey string `json:"topologyKey,omitempty"`
}

// ChildMetadata is added to the objects the operator creates for a KafkaMirror.
type ChildMetadata struct {
	// labels are added to the Deployment, Service, ConfigMap and PodDisruptionBudget
	// (the operator's own labels win).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the Deployment, Service, ConfigMap and
	// PodDisruptionBudget.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// KafkaMirrorStatus is what the operator observed.
type KafkaMirrorStatus struct {
	// observedGeneration is the spec generation the operator last reconciled
	// successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, TopicsSynced, Reconciling and Stalled, each with a reason
	// from api/v1alpha1 and the generation it was computed for.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicas is the number of mirror pods the Deployment has (its status.replicas:
	// observed, not desired; during a rollout old and new pods both count). The scale
	// subresource reports it.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of mirror pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector of the mirror pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// consumerGroup is the source consumer group the mirror commits its progress to.
	// +optional
	ConsumerGroup string `json:"consumerGroup,omitempty"`

	// topics summarises the last topic sync.
	// +optional
	Topics *TopicsStatus `json:"topics,omitempty"`

	// groups summarises the consumer-group checkpoints of spec.groups, read from the
	// target cluster at each topic sync. Absent without spec.groups.
	// +optional
	Groups *GroupsStatus `json:"groups,omitempty"`

	// autoscaling is the autoscaler's last decision, with spec.autoscaling.
	// +optional
	Autoscaling *AutoscalingStatus `json:"autoscaling,omitempty"`

	// failover is the state of spec.failover: phase, times and the report.
	// +optional
	Failover *FailoverStatus `json:"failover,omitempty"`

	// initialPositions is what spec.initialPositions.fromFailover resolved to, once the
	// named KafkaMirror's failover completed: the mirror then starts and keeps using it,
	// even when the named KafkaMirror is deleted afterwards.
	// +optional
	InitialPositions *InitialPositionsStatus `json:"initialPositions,omitempty"`
}

// AutoscalingStatus is the autoscaler's last decision and what it was based on.
type AutoscalingStatus struct {
	// currentReplicas is the number of ready mirror pods the decision saw.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas"`

	// desiredReplicas is the number of mirror pods the operator asks the Deployment for.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas"`

	// reason is ScaledUp, ScaledDown, Steady, Stabilizing, NoMeasuredRate or Paused.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says why, with the numbers.
	// +optional
	Message string `json:"message,omitempty"`

	// lastScaleTime is when the operator last changed desiredReplicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// lag is the consumer group's lag over the selected topics at the last sample, in
	// records.
	// +optional
	Lag *int64 `json:"lag,omitempty"`

	// inflowPerSecond is the rate at which records arrive on the selected source
	// topics, in records per second, measured between the last two samples.
	// +optional
	InflowPerSecond *int64 `json:"inflowPerSecond,omitempty"`

	// drainPerSecondPerReplica is the rate one mirror pod commits source records at, in
	// records per second: the highest of the recent rates measured while the mirror had
	// a backlog (its capacity), or the last measured rate when it had none yet.
	// +optional
	DrainPerSecondPerReplica *int64 `json:"drainPerSecondPerReplica,omitempty"`
}

// MaxTopicStatuses caps status.topics.items so that the status stays small however
// many topics are mirrored.
const MaxTopicStatuses = 100

// TopicsStatus summarises the selected topics after the last topic sync.
type TopicsStatus struct {
	// selected is the number of source topics selected by topics.include/exclude.
	// +optional
	Selected int32 `json:"selected"`

	// inSync is the number of selected topics whose target exists with the source's
	// partition count.
	// +optional
	InSync int32 `json:"inSync"`

	// mismatched is the number of selected topics whose target has more partitions
	// than the source (reported, never changed: partitions cannot be removed), or is
	// missing or has fewer while syncPartitions is false.
	// +optional
	Mismatched int32 `json:"mismatched"`

	// failed is the number of selected topics the last sync could not create or expand.
	// +optional
	Failed int32 `json:"failed"`

	// items lists the selected topics (the first 100 by source name), with their
	// partition counts and lag.
	// +optional
	// +listType=map
	// +listMapKey=source
	// +kubebuilder:validation:MaxItems=100
	Items []TopicStatus `json:"items,omitempty"`
}

// TopicState says where one topic stands after a topic sync.
type TopicState string

// Topic states.
const (
	// TopicStateInSync means the target exists with the source's partition count (the
	// operator may just have created or expanded it; an event says so).
	TopicStateInSync TopicState = "InSync"
	// TopicStateMismatched means the partition counts differ and the operator does not
	// change them (the target has more, or syncPartitions is false).
	TopicStateMismatched TopicState = "Mismatched"
	// TopicStateMissing means the target does not exist and syncPartitions is false.
	TopicStateMissing TopicState = "Missing"
	// TopicStateFailed means creating or expanding the target failed.
	TopicStateFailed TopicState = "Failed"
)

// TopicStatus is the state of one selected topic.
type TopicStatus struct {
	// source is the source topic name.
	// +required
	Source string `json:"source"`

	// target is the target topic name (after topics.rename).
	// +required
	Target string `json:"target"`

	// sourcePartitions is the source topic's partition count.
	// +optional
	SourcePartitions int32 `json:"sourcePartitions"`

	// sourceTopicId is the source topic's ID (Kafka 2.8 and later). A new ID means the
	// topic was deleted and created again: the mirror then starts the new topic at its
	// beginning and a SourceTopicRecreated event says so.
	// +optional
	SourceTopicID string `json:"sourceTopicId,omitempty"`

	// targetPartitions is the target topic's partition count (0 when it does not exist).
	// +optional
	TargetPartitions int32 `json:"targetPartitions"`

	// state is InSync, Mismatched, Missing or Failed.
	// +optional
	State TopicState `json:"state,omitempty"`

	// lag is the number of source records not yet committed by the mirror's consumer
	// group (sum over partitions of high watermark minus committed offset), in records.
	// Absent when it could not be read.
	// +optional
	Lag *int64 `json:"lag,omitempty"`

	// message explains a Mismatched, Missing or Failed state, or which configs of an
	// InSync topic could not be synced (refused by the target, or not readable or
	// writable) and why; the topic is mirrored without them.
	// +optional
	Message string `json:"message,omitempty"`
}
