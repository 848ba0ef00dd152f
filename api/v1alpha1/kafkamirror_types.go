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
// +kubebuilder:validation:XValidation:rule="!self.source.bootstrapServers.exists(s, self.target.bootstrapServers.exists(t, s.lowerAscii() == t.lowerAscii())) || (has(self.topics.rename) && ((has(self.topics.rename.prefix) && size(self.topics.rename.prefix) > 0) || (has(self.topics.rename.template) && size(self.topics.rename.template) > 0 && self.topics.rename.template != '{topic}')))",message="source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template"
// +kubebuilder:validation:XValidation:rule="has(self.consumerGroup) == has(oldSelf.consumerGroup) && (!has(self.consumerGroup) || self.consumerGroup == oldSelf.consumerGroup)",message="consumerGroup is immutable: it cannot be set, changed or removed after creation, because the mirror's committed offsets live in that group"
// +kubebuilder:validation:XValidation:rule="!has(self.delivery) || self.delivery != 'exactlyOnce' || !has(self.partitioning) || self.partitioning == 'preserve'",message="delivery exactlyOnce needs partitioning preserve: its transactions and fencing are per source partition"
// +kubebuilder:validation:XValidation:rule="!has(self.delivery) || self.delivery != 'exactlyOnce' || !has(self.handlers) || self.handlers.all(h, !has(h.name) || size(h.name) == 0)",message="delivery exactlyOnce allows CEL handlers only: a named handler may fan a record out"
// +kubebuilder:validation:XValidation:rule="!has(self.transactionInterval) || !has(self.offsetCommitInterval) || duration(self.transactionInterval) <= duration(self.offsetCommitInterval)",message="transactionInterval must be at most offsetCommitInterval"
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

	// syncTopicConfigs copies source topic configs (retention, cleanup policy, ...) to
	// the target topics the operator creates or syncs. Default false.
	// +optional
	SyncTopicConfigs bool `json:"syncTopicConfigs,omitempty"`

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

	// producer tunes the producer that writes to the target.
	// +optional
	Producer *ProducerSpec `json:"producer,omitempty"`

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

	// certSecretRef names a kubernetes.io/tls Secret (keys tls.crt and tls.key) whose
	// certificate and key the mirror presents for mutual TLS.
	// +optional
	CertSecretRef *SecretReference `json:"certSecretRef,omitempty"`

	// insecureSkipVerify disables verification of the brokers' certificates. For tests
	// only: it allows a man in the middle. Default false.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// SASLMechanism is a SASL mechanism the mirror can authenticate with.
//
// +kubebuilder:validation:Enum=PLAIN;SCRAM-SHA-256;SCRAM-SHA-512
type SASLMechanism string

// SASL mechanisms.
const (
	// SASLPlain sends the password as it is; use it only over TLS.
	SASLPlain SASLMechanism = "PLAIN"
	// SASLSCRAMSHA256 is SCRAM with SHA-256.
	SASLSCRAMSHA256 SASLMechanism = "SCRAM-SHA-256"
	// SASLSCRAMSHA512 is SCRAM with SHA-512.
	SASLSCRAMSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// SASLSpec configures SASL authentication towards a cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.passwordSecretRef)",message="sasl.passwordSecretRef is required: the SASL password is read from a Secret, never written in the KafkaMirror"
type SASLSpec struct {
	// mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	// +required
	Mechanism SASLMechanism `json:"mechanism"`

	// username is the SASL user name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Username string `json:"username"`

	// passwordSecretRef names the Secret key holding the SASL password. The key
	// defaults to password.
	// +optional
	PasswordSecretRef *SecretKeyReference `json:"passwordSecretRef,omitempty"`
}

// SecretKeyReference names one key of a Secret in the KafkaMirror's namespace.
type SecretKeyReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the key within the Secret. Default: password for a SASL password, ca.crt
	// for a CA bundle.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// SecretReference names a Secret in the KafkaMirror's namespace.
type SecretReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
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
}

// RenameSpec maps source topic names to target topic names. Set at most one field.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.prefix) && size(self.prefix) > 0 && has(self.template) && size(self.template) > 0)",message="set rename.prefix or rename.template, not both"
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

	// message explains a Mismatched, Missing or Failed state.
	// +optional
	Message string `json:"message,omitempty"`
}
