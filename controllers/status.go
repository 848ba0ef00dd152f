package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// observation collects what the reconcile steps found. Steps fill it and never touch
// conditions; computeStatus turns it into status in one place.
type observation struct {
	// disabled is true when the reconcile annotation paused reconciliation: no step ran.
	disabled bool
	config   *config.Config
	// invalid is a spec error the operator cannot fix: Stalled.
	invalid error
	// secretErr is a referenced Secret that could not be read.
	secretErr error
	// topics is the topic sync's outcome; ran is false when the sync was skipped or
	// has not finished yet; fresh is true for the first reconcile that sees it.
	topics      topicSyncResult
	topicsRan   bool
	topicsFresh bool
	// deployment is the Deployment as the API server returned it after apply.
	deployment *appsv1.Deployment
	// childErr is a failure to write a child object.
	childErr error
	// podProblem says why the Deployment is not ready when a person must act; nil
	// while pods are still starting, or when the Deployment is ready.
	podProblem *podProblem
	// autoscaling is the autoscaler's decision; nil without spec.autoscaling or when
	// the reconcile stopped before the autoscaling step.
	autoscaling *v1alpha1.AutoscalingStatus
	// scaled is true when the autoscaling step changed the replica count.
	scaled bool
	// failover is spec.failover's state as the failover step left it; nil without
	// spec.failover or when the reconcile stopped before that step.
	failover *v1alpha1.FailoverStatus
	// failbackProblem says why spec.initialPositions.fromFailover does not resolve yet:
	// the mirror is held back (WaitingForFailover). One that stalls is in invalid.
	failbackProblem *initialPositionsError
	// initialPositions is what spec.initialPositions resolved to; nil without it or when
	// the reconcile stopped before resolving it.
	initialPositions *v1alpha1.InitialPositionsStatus
}

// computeStatus returns m's status for what obs observed. Conditions keep their
// lastTransitionTime while their status does not change.
//
// Ready is True only when the mirror really mirrors: not paused, at least one replica,
// the Deployment available with every replica ready, and the topics synced.
func computeStatus(m *v1alpha1.KafkaMirror, obs *observation) v1alpha1.KafkaMirrorStatus {
	st := *m.Status.DeepCopy()
	gen := m.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}

	if obs.disabled {
		// The rest of the status keeps what the last reconcile found; the other
		// conditions' generation stays behind, which tells that they may be out of date.
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonReconcileDisabled,
			fmt.Sprintf("reconciliation is paused by the annotation %s: %s; remove it to resume", v1alpha1.ReconcileAnnotation, v1alpha1.ReconcileDisabled))
		return st
	}

	st.Selector = podSelector(m)
	st.ConsumerGroup = ConsumerGroup(m)
	switch {
	case m.Spec.Autoscaling == nil:
		st.Autoscaling = nil
	case obs.autoscaling != nil:
		st.Autoscaling = obs.autoscaling
	}
	// The replica count asked for in this reconcile, autoscaled or not.
	m = withAutoscaling(m, st.Autoscaling)
	if obs.deployment != nil {
		// Observed, not desired: the scale subresource reads status.replicas, and an
		// autoscaler must see the pods that run, not the ones asked for.
		st.Replicas = obs.deployment.Status.Replicas
		st.ReadyReplicas = obs.deployment.Status.ReadyReplicas
	}
	if obs.topicsRan && obs.topics.err == nil {
		st.Topics = topicsStatus(obs.topics)
		st.Groups = nextGroupsStatus(st.Groups, obs.config, obs.topics)
	}
	switch {
	case m.Spec.InitialPositions == nil:
		st.InitialPositions = nil
	case obs.initialPositions != nil:
		st.InitialPositions = obs.initialPositions
	}
	if obs.invalid != nil {
		msg, reason := obs.invalid.Error(), v1alpha1.ReasonInvalidSpec
		var notAllowed *notAllowedError
		if errors.As(obs.invalid, &notAllowed) {
			reason = notAllowed.reason
		}
		if isMirrorLoop(obs.invalid) {
			reason = v1alpha1.ReasonMirrorLoop
		}
		if isAutoscalerConflict(obs.invalid) {
			reason = v1alpha1.ReasonAutoscalerConflict
		}
		var group *consumerGroupInUseError
		if errors.As(obs.invalid, &group) {
			reason = v1alpha1.ReasonConsumerGroupInUse
		}
		var failback *initialPositionsError
		if errors.As(obs.invalid, &failback) {
			reason = failback.reason
		}
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, reason, "the spec must be fixed first; see the Stalled condition")
		set(v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, reason, msg)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		return st
	}
	set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled, "the spec is valid")
	if p := obs.failbackProblem; p != nil {
		// Held back: nothing is written, the topics are not synced, until the named
		// failover completed.
		msg := p.Error()
		set(v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, p.reason, "the topics are synced once the mirror starts: "+msg)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, p.reason, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, p.reason, msg)
		return st
	}
	if m.Spec.Failover != nil {
		// The topics are no longer synced: TopicsSynced says so (failoverConditions).
		st.Failover = failoverState(st.Failover, obs.failover)
		failoverConditions(st.Failover, set)
		return st
	}
	st.Failover = nil

	topicsStatus, topicsReason, topicsMsg := topicsCondition(obs)
	set(v1alpha1.ConditionTopicsSynced, topicsStatus, topicsReason, topicsMsg)

	readyStatus, readyReason, readyMsg := readyCondition(m, obs, topicsStatus == metav1.ConditionTrue, topicsReason, topicsMsg)
	set(v1alpha1.ConditionReady, readyStatus, readyReason, readyMsg)

	if msg := progressing(m, obs); msg != "" {
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing, msg)
	} else {
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonReconciled, "the cluster matches the spec")
	}
	return st
}

func topicsCondition(obs *observation) (metav1.ConditionStatus, string, string) {
	var missing *missingSecretError
	var forbidden *forbiddenSecretError
	switch {
	case errors.As(obs.secretErr, &forbidden):
		return metav1.ConditionFalse, v1alpha1.ReasonSecretForbidden, forbidden.Error()
	case errors.As(obs.secretErr, &missing):
		return metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, missing.Error()
	case obs.secretErr != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound, obs.secretErr.Error()
	case !obs.topicsRan:
		return metav1.ConditionUnknown, v1alpha1.ReasonProgressing, "the topics have not been synced yet"
	case obs.topics.err != nil && obs.topics.role == kafka.RoleTarget:
		return metav1.ConditionFalse, v1alpha1.ReasonTargetUnreachable, obs.topics.err.Error()
	case obs.topics.err != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonSourceUnreachable, obs.topics.err.Error()
	}
	ts := topicsStatus(obs.topics)
	var failed, hasMore, blocked, refused []string
	for _, t := range obs.topics.report.Topics {
		if len(t.RefusedConfigs) > 0 || t.ConfigErr != nil {
			refused = append(refused, t.Source)
		}
		switch state, _ := topicStateOf(t, obs.topics.dryRun); {
		case state == v1alpha1.TopicStateFailed:
			failed = append(failed, t.Source)
		case state == v1alpha1.TopicStateMissing, state == v1alpha1.TopicStateMismatched && t.Action != topics.ActionTargetHasMore:
			blocked = append(blocked, t.Source)
		case state == v1alpha1.TopicStateMismatched:
			hasMore = append(hasMore, t.Source)
		}
	}
	switch {
	case len(failed) > 0:
		return metav1.ConditionFalse, v1alpha1.ReasonTopicSyncFailed,
			fmt.Sprintf("%d of %d topics could not be synced: %s (see status.topics.items)", len(failed), ts.Selected, listNames(failed))
	case len(blocked) > 0:
		return metav1.ConditionFalse, v1alpha1.ReasonTopicSyncDisabled,
			fmt.Sprintf("the targets of %s are missing or have fewer partitions than their source, and syncPartitions is false: create or expand them, or set syncPartitions to true", listNames(blocked))
	case ts.Selected == 0:
		return metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected,
			fmt.Sprintf("no source topic matches spec.topics yet; the source is checked again every %s", syncInterval(obs))
	}
	// Configs not synced leave the topics mirrored, so the condition stays True and says so.
	var note string
	if len(refused) > 0 {
		note = fmt.Sprintf("; some configs of %s could not be synced, and the topics are mirrored without them (see status.topics.items)", listNames(refused))
	}
	if len(hasMore) > 0 {
		return metav1.ConditionTrue, v1alpha1.ReasonTargetHasMorePartitions,
			fmt.Sprintf("%d topics in sync; the targets of %s have more partitions than their source (reported only: partitions cannot be removed)%s",
				ts.InSync, listNames(hasMore), note)
	}
	return metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync, fmt.Sprintf("%d topics in sync%s", ts.InSync, note)
}

func syncInterval(obs *observation) string {
	if obs.config == nil {
		return config.DefaultTopicSyncInterval.String()
	}
	return obs.config.TopicSyncInterval.Duration.String()
}

// listNames lists up to five names, then how many more there are.
func listNames(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func readyCondition(m *v1alpha1.KafkaMirror, obs *observation, topicsSynced bool, topicsReason, topicsMsg string) (metav1.ConditionStatus, string, string) {
	want := desiredReplicas(m)
	switch {
	case m.Spec.Paused:
		return metav1.ConditionFalse, v1alpha1.ReasonPaused, "spec.paused is true: the mirror is scaled to 0 (each pod drained and committed before it stopped)"
	case want == 0:
		return metav1.ConditionFalse, v1alpha1.ReasonScaledToZero, "spec.replicas is 0: nothing is mirrored"
	case topicsReason == v1alpha1.ReasonSecretNotFound, topicsReason == v1alpha1.ReasonSecretForbidden:
		return metav1.ConditionFalse, topicsReason, topicsMsg
	case obs.childErr != nil:
		return metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady, obs.childErr.Error()
	case !topicsSynced:
		return metav1.ConditionFalse, v1alpha1.ReasonTopicsNotSynced, "topics are not synced: " + topicsMsg
	case obs.podProblem != nil && obs.deployment != nil && !deploymentReady(obs.deployment, want):
		return metav1.ConditionFalse, obs.podProblem.reason, obs.podProblem.message
	case obs.deployment == nil || !deploymentReady(obs.deployment, want):
		ready := int32(0)
		if obs.deployment != nil {
			ready = obs.deployment.Status.ReadyReplicas
		}
		return metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady,
			fmt.Sprintf("%d of %d mirror pods ready", ready, want)
	}
	return metav1.ConditionTrue, v1alpha1.ReasonAvailable, fmt.Sprintf("%d of %d mirror pods ready; %s", want, want, topicsMsg)
}

// progressing says what the operator is still waiting for ("" when nothing).
func progressing(m *v1alpha1.KafkaMirror, obs *observation) string {
	switch {
	case obs.childErr != nil:
		return "writing the mirror's objects failed: " + obs.childErr.Error()
	case errors.As(obs.secretErr, new(*forbiddenSecretError)):
		return "waiting until the operator may read a referenced Secret"
	case obs.secretErr != nil:
		return "waiting for a referenced Secret"
	case obs.topicsRan && obs.topics.err != nil:
		return "retrying the topic sync"
	case !obs.topicsRan:
		return "syncing the topics"
	case obs.deployment == nil:
		return "the mirror Deployment has not been written yet"
	case !deploymentReady(obs.deployment, desiredReplicas(m)):
		return "the mirror Deployment is rolling out"
	}
	return ""
}

// finalizeStatus writes m's status once per reconcile, as a merge patch of what
// changed, and only when something changed. observedGeneration moves only when the
// reconcile succeeded or stalled on the spec (a transient failure leaves it behind). Events are emitted for condition changes a person cares about.
func (r *KafkaMirrorReconciler) finalizeStatus(ctx context.Context, m *v1alpha1.KafkaMirror, obs *observation, reconcileErr error) error {
	next := computeStatus(m, obs)
	// A stalled spec is a finished reconcile too: its outcome is Stalled, and kstatus
	// readers trust Stalled only when observedGeneration is current.
	// A paused reconcile applied nothing, so the generation is not observed.
	// A topic sync still running for this spec (it runs off the workers) leaves it
	// behind too: the generation is observed once its outcome is known.
	if (reconcileErr == nil && !obs.disabled && obs.topicsRan) || obs.invalid != nil {
		next.ObservedGeneration = m.Generation
	}
	r.recordTransitions(m, &next, obs)
	reportLag(m, &next)
	reportGroups(m, &next, obs.config)
	if equality.Semantic.DeepEqual(m.Status, next) {
		return reconcileErr
	}
	orig := m.DeepCopy()
	m.Status = next
	if err := r.Status().Patch(ctx, m, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(reconcileErr, fmt.Errorf("while patching the status of KafkaMirror %s/%s: %w", m.Namespace, m.Name, err))
	}
	return reconcileErr
}

// warningReasons are the reasons a person can act on; the others are Normal events.
var warningReasons = map[string]bool{
	v1alpha1.ReasonInvalidSpec:               true,
	v1alpha1.ReasonBootstrapServerNotAllowed: true,
	v1alpha1.ReasonEndpointNotAllowed:        true,
	v1alpha1.ReasonAssumeRoleNotAllowed:      true,
	v1alpha1.ReasonPrivilegedPodNotAllowed:   true,
	v1alpha1.ReasonMirrorLoop:                true,
	v1alpha1.ReasonConsumerGroupInUse:        true,
	v1alpha1.ReasonAutoscalerConflict:        true,
	v1alpha1.ReasonSecretNotFound:            true,
	v1alpha1.ReasonSecretForbidden:           true,
	v1alpha1.ReasonSourceUnreachable:         true,
	v1alpha1.ReasonTargetUnreachable:         true,
	v1alpha1.ReasonTopicSyncFailed:           true,
	v1alpha1.ReasonTopicSyncDisabled:         true,
	v1alpha1.ReasonFailoverFailed:            true,
	v1alpha1.ReasonFailoverNotUsable:         true,
}

// recordTransitions emits an event when Ready or TopicsSynced changes reason, and one
// when the topic sync created or expanded target topics. Event reasons equal condition
// reasons.
func (r *KafkaMirrorReconciler) recordTransitions(m *v1alpha1.KafkaMirror, next *v1alpha1.KafkaMirrorStatus, obs *observation) {
	if r.Recorder == nil {
		return
	}
	for _, typ := range []string{v1alpha1.ConditionTopicsSynced, v1alpha1.ConditionReady} {
		now := meta.FindStatusCondition(next.Conditions, typ)
		before := meta.FindStatusCondition(m.Status.Conditions, typ)
		if now == nil || now.Status == metav1.ConditionUnknown || (before != nil && before.Reason == now.Reason && before.Status == now.Status) {
			continue
		}
		eventType := corev1.EventTypeNormal
		if warningReasons[now.Reason] {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(m, nil, eventType, now.Reason, "Reconcile", "%s is %s: %s", typ, now.Status, now.Message)
	}
	recordScaling(r.Recorder, m, next, obs)
	recordRecreatedTopics(r.Recorder, m, next)
	if obs.topicsRan && obs.topicsFresh && obs.topics.err == nil {
		if changes := topicChanges(obs.topics); changes != "" {
			r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, v1alpha1.ReasonTopicsInSync, "SyncTopics", "Target topics changed: %s", changes)
		}
	}
}
