package v1alpha1

// Condition types of a KafkaMirror. Ready and TopicsSynced are positive ("normal-true");
// Reconciling and Stalled follow kstatus and are True only while they apply, so that
// generic tools (kstatus, Argo CD, Flux) read a KafkaMirror without knowing it.
const (
	// ConditionReady is True when the mirror runs as declared: the Deployment is
	// available with all of its replicas (at least one) ready, the topics are synced, and
	// the mirror is not paused.
	ConditionReady = "Ready"
	// ConditionTopicsSynced is True when every selected source topic has a target topic
	// the mirror can write to with the source's partitions.
	ConditionTopicsSynced = "TopicsSynced"
	// ConditionReconciling is True while the operator is still moving the cluster
	// towards the spec (first reconcile, rollout in progress, Kafka not reachable yet).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the spec cannot be reconciled until a person
	// changes it (for example a regular expression or CEL expression that does not
	// compile). Its message names the field.
	ConditionStalled = "Stalled"
	// ConditionFailedOver is present with spec.failover: True once the failover
	// completed (reason FailedOver), False while it runs (reason FailingOver) or when it
	// failed (reason FailoverFailed).
	ConditionFailedOver = "FailedOver"
)

// Condition reasons. Event reasons are the same strings.
const (
	// ReasonAvailable (Ready=True): the mirror pods are ready and the topics in sync.
	ReasonAvailable = "Available"
	// ReasonPaused (Ready=False): spec.paused is true, the Deployment is scaled to 0.
	ReasonPaused = "Paused"
	// ReasonScaledToZero (Ready=False): spec.replicas is 0.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonDeploymentNotReady (Ready=False, Reconciling=True): mirror pods are
	// starting, rolling out or failing their readiness probe.
	ReasonDeploymentNotReady = "DeploymentNotReady"
	// ReasonCrashLoop (Ready=False): a mirror container keeps exiting; the message holds
	// its last termination message (the engine exits with a one-line error).
	ReasonCrashLoop = "CrashLoop"
	// ReasonImagePull (Ready=False): a mirror pod's image cannot be pulled.
	ReasonImagePull = "ImagePull"
	// ReasonUnschedulable (Ready=False): a mirror pod fits on no node.
	ReasonUnschedulable = "Unschedulable"
	// ReasonRolloutStuck (Ready=False): the mirror Deployment passed its
	// progressDeadlineSeconds without finishing its rollout.
	ReasonRolloutStuck = "RolloutStuck"
	// ReasonTopicsNotSynced (Ready=False): see the TopicsSynced condition.
	ReasonTopicsNotSynced = "TopicsNotSynced"
	// ReasonInvalidSpec (Stalled=True, Ready=False, TopicsSynced=False): the spec
	// failed validation; the message names the field and the reason.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonBootstrapServerNotAllowed (Stalled=True, Ready=False, TopicsSynced=False): a
	// bootstrap server of the spec is outside the operator's allowed bootstrap servers
	// (--allowed-bootstrap-servers); the operator does not connect to it. The message
	// names the field, e.g. spec.source.bootstrapServers[0].
	ReasonBootstrapServerNotAllowed = "BootstrapServerNotAllowed"
	// ReasonEndpointNotAllowed (Stalled=True, Ready=False, TopicsSynced=False): an
	// endpoint URL of the spec (sasl.oauth.tokenUrl) is outside the operator's allowed
	// endpoints (--allowed-endpoints) while the operator's allow-list is in force; the
	// operator sends nothing there. The message names the field.
	ReasonEndpointNotAllowed = "EndpointNotAllowed"
	// ReasonAssumeRoleNotAllowed (Stalled=True, Ready=False, TopicsSynced=False): the
	// spec names an AWS role (sasl.aws.roleArn) that the operator would assume with its
	// own identity for the topic sync, and the operator was not started with
	// --allow-assume-role. The message names the field.
	ReasonAssumeRoleNotAllowed = "AssumeRoleNotAllowed"
	// ReasonPrivilegedPodNotAllowed (Stalled=True, Ready=False, TopicsSynced=False): the
	// operator runs with --refuse-privileged-pods and spec.pod asks for more than the
	// "restricted" Pod Security Standard allows (a privileged container, an added
	// capability, root, a hostPath volume, ...). The message names each field.
	ReasonPrivilegedPodNotAllowed = "PrivilegedPodNotAllowed"
	// ReasonMirrorLoop (Stalled=True, Ready=False, TopicsSynced=False): another
	// KafkaMirror mirrors this one's target back into its source under the same topic
	// names, and spec.provenance.enabled is not true on both, so records would loop
	// between the two clusters. Only the later of the two is refused: the one that was
	// there first (running at its current spec, else created first) goes on. The message
	// names a topic, and the other KafkaMirror when it is in the same namespace
	// ("another KafkaMirror in the cluster" otherwise). The operator looks again every
	// topicSyncInterval, so fixing either mirror clears it.
	ReasonMirrorLoop = "MirrorLoop"
	// ReasonConsumerGroupInUse (Stalled=True, Ready=False, TopicsSynced=False): another
	// KafkaMirror that was there first uses the same consumer group (spec.consumerGroup,
	// or the default kafka-mirror.<namespace>.<name>) on the same source cluster, or
	// into the same target cluster. A group belongs to one mirror per cluster: so do the
	// progress group <group>.source-offsets, the offset-sync topic and the exactly-once
	// transactional ids derived from it. Two mirrors sharing them would split the
	// partitions and commit for each other, and records would be lost. Re-create this
	// KafkaMirror with a spec.consumerGroup of its own (it is immutable); the operator
	// looks again every topicSyncInterval, so the other mirror's deletion clears it.
	ReasonConsumerGroupInUse = "ConsumerGroupInUse"
	// ReasonAutoscalerConflict (Stalled=True, Ready=False, TopicsSynced=False): a
	// HorizontalPodAutoscaler (KEDA's keda-hpa-<name> for a ScaledObject too) scales
	// this KafkaMirror's Deployment, which the operator writes (its replicas would be
	// taken back at every reconcile), or scales this KafkaMirror while spec.autoscaling
	// is set (two autoscalers would fight over the replica count). The message names
	// the HorizontalPodAutoscaler and the fix: aim it at the KafkaMirror (its scale
	// subresource), or use spec.autoscaling instead. Meanwhile the operator leaves the
	// Deployment to it; it looks again every topicSyncInterval.
	ReasonAutoscalerConflict = "AutoscalerConflict"

	// ReasonTopicsInSync (TopicsSynced=True): every selected topic has its target with
	// the source's partition count.
	ReasonTopicsInSync = "TopicsInSync"

	// ReasonSourceTopicRecreated is the reason of the Warning event emitted when a
	// selected source topic's ID changed between two topic syncs: it was deleted and
	// created again, and the mirror starts the new topic at its beginning (records of
	// the old topic that were not mirrored before its deletion are gone with it).
	ReasonSourceTopicRecreated = "SourceTopicRecreated"
	// ReasonTargetHasMorePartitions (TopicsSynced=True): some targets have more
	// partitions than their source; the mirror works, the counts are reported only,
	// because partitions cannot be removed.
	ReasonTargetHasMorePartitions = "TargetHasMorePartitions"
	// ReasonNoTopicsSelected (TopicsSynced=True): no source topic matches yet; new
	// topics are found at the next sync.
	ReasonNoTopicsSelected = "NoTopicsSelected"
	// ReasonTopicSyncDisabled (TopicsSynced=False): syncPartitions is false and some
	// targets are missing or have fewer partitions than their source.
	ReasonTopicSyncDisabled = "TopicSyncDisabled"
	// ReasonTopicSyncFailed (TopicsSynced=False): creating or expanding some target
	// topics failed; the message names them.
	ReasonTopicSyncFailed = "TopicSyncFailed"
	// ReasonSourceUnreachable (TopicsSynced=False): the source cluster could not be
	// reached or refused the credentials.
	ReasonSourceUnreachable = "SourceUnreachable"
	// ReasonTargetUnreachable (TopicsSynced=False): the target cluster could not be
	// reached or refused the credentials.
	ReasonTargetUnreachable = "TargetUnreachable"
	// ReasonSecretNotFound (TopicsSynced=False, Ready=False): a referenced Secret or
	// Secret key does not exist yet; the mirror is retried when it appears.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretForbidden (TopicsSynced=False, Ready=False): RBAC does not let the
	// operator read a referenced Secret in the KafkaMirror's namespace; the message names
	// the field, the Secret and the namespace to add to the chart's rbac.secretNamespaces.
	// The mirror is retried within one Secret poll once the operator may read it.
	ReasonSecretForbidden = "SecretForbidden"

	// ReasonProgressing (Reconciling=True): the operator is applying a change.
	ReasonProgressing = "Progressing"
	// ReasonReconciled (Reconciling=False, Stalled=False): nothing left to do.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileDisabled (Reconciling=False): the KafkaMirror carries
	// ReconcileAnnotation=ReconcileDisabled; the operator leaves its children and Kafka
	// alone, and Ready, TopicsSynced and Stalled keep what they said before the pause.
	ReasonReconcileDisabled = "ReconcileDisabled"

	// ReasonFailedOver (FailedOver=True, Ready=False, TopicsSynced=False): spec.failover completed; the
	// mirror stays stopped and status.failover.report says what was left behind.
	ReasonFailedOver = "FailedOver"
	// ReasonFailingOver (FailedOver=False, Ready=False, TopicsSynced=False): spec.failover is under way:
	// the mirror is stopping or the failover Job runs.
	ReasonFailingOver = "FailingOver"
	// ReasonFailoverFailed (FailedOver=False, Ready=False, TopicsSynced=False): the failover Job failed;
	// status.failover.message says why (the engine's error, or the Job's deadline
	// passed). Deleting the Job <name>-failover retries it.
	ReasonFailoverFailed = "FailoverFailed"

	// ReasonWaitingForFailover (Ready=False, TopicsSynced=False, Reconciling=True): the
	// KafkaMirror named by spec.initialPositions.fromFailover does not exist (yet) in
	// this namespace, declares no failover, or its failover has not completed. The mirror
	// is not started (no children are written); the operator looks again whenever the
	// named KafkaMirror changes.
	ReasonWaitingForFailover = "WaitingForFailover"
	// ReasonFailoverNotUsable (Stalled=True, Ready=False, TopicsSynced=False): the
	// KafkaMirror named by spec.initialPositions.fromFailover cannot be failed back
	// from: its failover failed, or its target cluster is not this mirror's source
	// cluster (they share no bootstrap server). The message names the field and why.
	// The mirror is not started; the operator looks again when the named KafkaMirror
	// changes (its failover retried, its spec fixed).
	ReasonFailoverNotUsable = "FailoverNotUsable"
)

// Autoscaling reasons, in status.autoscaling.reason; ScaledUp and ScaledDown are event
// reasons too.
const (
	// ReasonScaledUp: the autoscaler raised desiredReplicas.
	ReasonScaledUp = "ScaledUp"
	// ReasonScaledDown: the autoscaler lowered desiredReplicas.
	ReasonScaledDown = "ScaledDown"
	// ReasonSteady: the recommendation equals the current replica count.
	ReasonSteady = "Steady"
	// ReasonStabilizing: the recommendation differs from the current replica count, and
	// a stabilisation window holds the change back.
	ReasonStabilizing = "Stabilizing"
	// ReasonNoMeasuredRate: the drain rate per replica is not known yet (fewer than two
	// lag samples, or no pod ready), so nothing is decided and the replicas stay.
	ReasonNoMeasuredRate = "NoMeasuredRate"
)

// ReconcileAnnotation set to ReconcileDisabled on a KafkaMirror pauses the operator's
// own reconciliation of it: its children are neither written nor restored and Kafka is
// not contacted, while the running mirror pods go on as they are. Removing the
// annotation (or any other value) resumes it. Unlike spec.paused, nothing is scaled down.
const (
	ReconcileAnnotation = "kafkamirror.io/reconcile"
	// ReconcileDisabled is the ReconcileAnnotation value that pauses reconciliation.
	ReconcileDisabled = "disabled"
)
