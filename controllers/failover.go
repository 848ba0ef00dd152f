package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// jobNameLabel is the label the Job controller puts on a Job's pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

// terminationLogPath is where the failover container writes its summary: the kubelet
// makes it the container's termination message.
const terminationLogPath = "/dev/termination-log"

// failoverStopRecheck is how soon the operator looks again for mirror pods while they
// drain (pods are not watched); failoverJobRecheck bounds the wait for a Job event.
const (
	failoverStopRecheck = 5 * time.Second
	failoverJobRecheck  = 30 * time.Second
)

// The failover Job's deadline (activeDeadlineSeconds): the engine's own bound on the
// failover (spec.failover.timeout, or the engine's default for the mode) plus
// failoverJobMargin for the pod to be scheduled, pull its image and connect. An
// immediate failover bounds each wait for a cluster by the timeout, not the whole
// operation: its Job gets immediateFailoverWaits of them. A Job past its deadline is
// stopped by the Job controller and the failover is Failed, saying so.
const (
	failoverJobMargin      = 5 * time.Minute
	immediateFailoverWaits = 10
)

// maxFailoverMessageBytes bounds the text of a termination message kept in status.
const maxFailoverMessageBytes = 1024

// failoverJobName is the name of m's failover Job.
func failoverJobName(m *v1alpha1.KafkaMirror) string { return m.Name + "-failover" }

// failoverStep drives spec.failover and ends the reconcile when it is set: the
// Deployment goes to 0 replicas (its pods drain and commit on SIGTERM); once no mirror
// pod is left, the Job <name>-failover runs `kafka-mirror failover` with the pods' own
// config and Secrets; its termination message (a mirror.FailoverSummary) becomes
// status.failover.report. The topics are no longer synced and nothing is autoscaled.
// A completed failover is final; a failed one is run again when its Job is deleted.
func (r *KafkaMirrorReconciler) failoverStep(ctx context.Context, s *reconcileScope) (stepResult, error) {
	if s.m.Spec.Failover == nil {
		return goOn, nil
	}
	st := &v1alpha1.FailoverStatus{Phase: v1alpha1.FailoverPending}
	if s.m.Status.Failover != nil {
		st = s.m.Status.Failover.DeepCopy()
	}
	s.obs.failover = st
	s.live = s.m // desiredReplicas is 0 with spec.failover
	if s.obs.deployment, s.obs.childErr = r.applyChildren(ctx, s.live, s.obs.config, s.files); s.obs.childErr != nil {
		return stopWith(ctrl.Result{}), s.obs.childErr
	}
	if st.Phase == v1alpha1.FailoverCompleted {
		return stopWith(ctrl.Result{}), nil
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.m.Namespace, Name: failoverJobName(s.m)}, job)
	switch {
	case err == nil:
		return r.followFailoverJob(ctx, s.m, job, st)
	case !apierrors.IsNotFound(err):
		return stopWith(ctrl.Result{}), fmt.Errorf("while reading the failover Job: %w", err)
	}
	if st.StartTime == nil || (st.Phase == v1alpha1.FailoverFailed && st.CompletionTime != nil) {
		// A new run: the first, or a failed one retried (its Job was deleted).
		st.StartTime, st.CompletionTime, st.Report = ptr.To(metav1.Now()), nil, nil
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(s.m.Namespace), client.MatchingLabels(selectorLabels(s.m))); err != nil {
		return stopWith(ctrl.Result{}), fmt.Errorf("while listing the mirror pods: %w", err)
	}
	if n := len(pods.Items); n > 0 {
		st.Phase = v1alpha1.FailoverStopping
		st.Message = fmt.Sprintf("the mirror is scaled to 0: waiting for %d mirror pods to drain, commit and exit", n)
		return stopWith(ctrl.Result{RequeueAfter: failoverStopRecheck}), nil
	}
	job = failoverJob(s.m, r.Image, s.obs.deployment.Spec.Template.Annotations[ConfigHashAnnotation])
	if r.LeaveUserIDUnset {
		unpinUserID(&job.Spec.Template.Spec)
	}
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		st.Phase, st.Message = v1alpha1.FailoverFailed, fmt.Sprintf("the failover Job %s could not be created: %v", job.Name, err)
		return stopWith(ctrl.Result{}), fmt.Errorf("while creating the failover Job: %w", err)
	}
	st.Phase = v1alpha1.FailoverRunning
	st.Message = fmt.Sprintf("no mirror pod is left; the failover Job %s runs", job.Name)
	return stopWith(ctrl.Result{RequeueAfter: failoverJobRecheck}), nil
}

// followFailoverJob sets st from job: Running until it finishes, then Completed with
// the report or Failed with why.
func (r *KafkaMirrorReconciler) followFailoverJob(ctx context.Context, m *v1alpha1.KafkaMirror, job *batchv1.Job, st *v1alpha1.FailoverStatus) (stepResult, error) {
	done, failed, at, why := jobOutcome(job)
	if !done {
		st.Phase = v1alpha1.FailoverRunning
		st.Message = fmt.Sprintf("no mirror pod is left; the failover Job %s runs", job.Name)
		if st.StartTime == nil {
			st.StartTime = ptr.To(metav1.Now())
		}
		return stopWith(ctrl.Result{RequeueAfter: failoverJobRecheck}), nil
	}
	if (st.Phase == v1alpha1.FailoverFailed) == failed && st.CompletionTime != nil {
		return stopWith(ctrl.Result{}), nil // already reported
	}
	msg, err := r.failoverTerminationMessage(ctx, m, job)
	if err != nil {
		return stopWith(ctrl.Result{}), err
	}
	summary, isSummary := parseFailoverSummary(msg)
	st.CompletionTime = &at
	if isSummary {
		st.Report = failoverReport(summary)
	}
	switch {
	case failed && deadlineExceeded(job):
		st.Phase, st.Message = v1alpha1.FailoverFailed, deadlineMessage(m, job, msg, isSummary)
	case !failed:
		st.Phase, st.Message = v1alpha1.FailoverCompleted, completedMessage(summary, isSummary)
	case isSummary && summary.Error != "":
		st.Phase, st.Message = v1alpha1.FailoverFailed, summary.Error
	case msg != "":
		st.Phase, st.Message = v1alpha1.FailoverFailed, truncate(msg, maxFailoverMessageBytes)
	default:
		st.Phase, st.Message = v1alpha1.FailoverFailed, why
	}
	return stopWith(ctrl.Result{}), nil
}

// deadlineExceeded tells whether the Job controller stopped job at its
// activeDeadlineSeconds.
func deadlineExceeded(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			return true
		}
	}
	return false
}

// deadlineMessage says that the failover Job of m was stopped at its deadline, with
// the end of what its pod said when that is no summary.
func deadlineMessage(m *v1alpha1.KafkaMirror, job *batchv1.Job, msg string, isSummary bool) string {
	deadline := failoverDeadline(m.Spec.Failover)
	if s := job.Spec.ActiveDeadlineSeconds; s != nil {
		deadline = time.Duration(*s) * time.Second
	}
	out := fmt.Sprintf("the failover Job %s passed its deadline of %s (%s) and was stopped; delete the Job to run the failover again",
		job.Name, deadline, deadlineBasis(m.Spec.Failover))
	if msg != "" && !isSummary {
		out += "; its last output: " + truncate(msg, maxFailoverMessageBytes/2)
	}
	return out
}

// failoverDeadline is the activeDeadlineSeconds of the failover Job for f.
func failoverDeadline(f *v1alpha1.FailoverSpec) time.Duration {
	timeout, waits := failoverTimeout(f)
	return time.Duration(waits)*timeout + failoverJobMargin
}

// failoverTimeout is the engine's bound for f and how many of it the Job allows.
func failoverTimeout(f *v1alpha1.FailoverSpec) (time.Duration, int) {
	timeout, waits := mirror.DefaultPlannedFailoverTimeout, 1
	if f.Mode == string(mirror.FailoverImmediate) {
		timeout, waits = mirror.DefaultImmediateFailoverTimeout, immediateFailoverWaits
	}
	if f.Timeout != nil {
		timeout = f.Timeout.Duration
	}
	return timeout, waits
}

// deadlineBasis says how failoverDeadline came about, for the message.
func deadlineBasis(f *v1alpha1.FailoverSpec) string {
	timeout, waits := failoverTimeout(f)
	what := "spec.failover.timeout " + timeout.String()
	if f.Timeout == nil {
		what = "the default timeout " + timeout.String()
	}
	if waits > 1 {
		what = fmt.Sprintf("%d waits of %s", waits, what)
	}
	return fmt.Sprintf("%s plus %s for the pod to start", what, failoverJobMargin)
}

// jobOutcome tells whether job finished, whether it failed, when, and the Job
// controller's reason.
func jobOutcome(job *batchv1.Job) (done, failed bool, at metav1.Time, why string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			at = c.LastTransitionTime
			if job.Status.CompletionTime != nil {
				at = *job.Status.CompletionTime
			}
			return true, false, at, ""
		case batchv1.JobFailed:
			return true, true, c.LastTransitionTime, strings.TrimSpace(fmt.Sprintf("the failover Job failed: %s %s", c.Reason, c.Message))
		}
	}
	return false, false, metav1.Time{}, ""
}

// failoverTerminationMessage is the termination message of the failover container of
// job's last finished pod; "" when there is none (the pod is gone).
func (r *KafkaMirrorReconciler) failoverTerminationMessage(ctx context.Context, m *v1alpha1.KafkaMirror, job *batchv1.Job) (string, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(m.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return "", fmt.Errorf("while listing the failover Job's pods: %w", err)
	}
	var msg string
	var last time.Time
	for _, p := range pods.Items {
		if !metav1.IsControlledBy(&p, job) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == containerName && t != nil && !t.FinishedAt.Time.Before(last) {
				msg, last = t.Message, t.FinishedAt.Time
			}
		}
	}
	return strings.TrimSpace(msg), nil
}

// parseFailoverSummary reads msg as the JSON summary `kafka-mirror failover
// --termination-log` writes; false when it is not (the container failed before, and
// the kubelet took its log tail).
func parseFailoverSummary(msg string) (mirror.FailoverSummary, bool) {
	var s mirror.FailoverSummary
	if err := json.Unmarshal([]byte(msg), &s); err != nil || s.Mode == "" {
		return s, false
	}
	return s, true
}

// failoverReport is status.failover.report for s.
func failoverReport(s mirror.FailoverSummary) *v1alpha1.FailoverReport {
	rep := &v1alpha1.FailoverReport{
		SourceReachable:   s.SourceReachable,
		Partitions:        int32(s.Partitions),
		LeftBehind:        s.LeftBehind,
		LeftBehindUnknown: int32(s.LeftBehindUnknown),
		Truncated:         s.Truncated,
	}
	if s.CutoverAt != nil {
		rep.CutoverTime = &metav1.Time{Time: *s.CutoverAt}
	}
	for _, p := range s.PartitionDetails {
		rep.PartitionDetails = append(rep.PartitionDetails, v1alpha1.FailoverPartitionReport{
			Topic: p.Topic, Partition: p.Partition, SourceEnd: p.SourceEnd,
			Committed: p.Committed, LeftBehind: p.LeftBehind, TargetEnd: p.TargetEnd,
		})
	}
	for _, g := range s.GroupDetails {
		rep.GroupDetails = append(rep.GroupDetails, v1alpha1.FailoverGroupReport{
			Group: g.Group, Partitions: int32(g.Partitions), Committed: int32(g.Committed), Exact: int32(g.Exact),
		})
	}
	return rep
}

// completedMessage says in one line what a completed failover left behind.
func completedMessage(s mirror.FailoverSummary, isSummary bool) string {
	if !isSummary {
		return "the failover completed; its report is in the failover Job's log"
	}
	left := fmt.Sprintf("%d records left behind", s.LeftBehind)
	if s.LeftBehindUnknown > 0 {
		left += fmt.Sprintf(" (unknown or an upper bound for %d partitions)", s.LeftBehindUnknown)
	}
	msg := fmt.Sprintf("%s failover completed: %s in %d partitions", s.Mode, left, s.Partitions)
	if s.CutoverAt != nil {
		msg += "; cutover at " + s.CutoverAt.UTC().Format(time.RFC3339)
	}
	return msg + "; the mirror stays stopped"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:] // a log tail: its end says why
}

// failoverJob runs `kafka-mirror failover` for m in a pod made like the mirror's own
// (image, config and Secret volumes, security context), once (no restart, no retry),
// writing its summary as the termination message. Its pods do not carry the mirror's
// selector labels, so neither the Deployment's selector nor the Service takes them.
func failoverJob(m *v1alpha1.KafkaMirror, image, configHash string) *batchv1.Job {
	tmpl := mirrorDeployment(m, image, configHash).Spec.Template
	labels := maps.Clone(m.Spec.Pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{
		labelName: "kafka-mirror-failover", labelInstance: m.Name, labelComponent: "failover",
		labelManagedBy: FieldOwner, labelPartOf: "kafka-mirror",
	})
	tmpl.Labels = labels
	spec := &tmpl.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	c := &spec.Containers[0]
	c.Args = failoverArgs(m)
	c.Ports, c.LivenessProbe, c.ReadinessProbe = nil, nil, nil
	c.TerminationMessagePath = terminationLogPath
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	meta := childMeta(m, failoverJobName(m))
	meta.Labels[labelComponent] = "failover"
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(int64(failoverDeadline(m.Spec.Failover).Seconds())),
			Template:              tmpl,
		},
	}
}

// failoverArgs runs the failover of spec.failover on the mirror's rendered config.
func failoverArgs(m *v1alpha1.KafkaMirror) []string {
	f := m.Spec.Failover
	args := []string{"failover", "--config", configPath, "--mode", f.Mode, "-o", "json",
		"--termination-log", terminationLogPath, "--log-format", "json"}
	if f.Timeout != nil {
		args = append(args, "--timeout", f.Timeout.Duration.String())
	}
	if m.Spec.LogLevel != "" {
		args = append(args, "--log-level", m.Spec.LogLevel)
	}
	return args
}

// failoverState is status.failover: what the failover step found, else what the
// status said, else Pending.
func failoverState(prev, observed *v1alpha1.FailoverStatus) *v1alpha1.FailoverStatus {
	switch {
	case observed != nil:
		return observed
	case prev != nil:
		return prev
	}
	return &v1alpha1.FailoverStatus{Phase: v1alpha1.FailoverPending, Message: "spec.failover is set; the operator has not acted on it yet"}
}

// failoverConditions sets FailedOver, Ready, Reconciling and TopicsSynced for a
// declared failover. The topic sync stops with the failover: TopicsSynced says so, and
// no longer what the last sync found.
func failoverConditions(f *v1alpha1.FailoverStatus, set func(typ string, status metav1.ConditionStatus, reason, msg string)) {
	switch f.Phase {
	case v1alpha1.FailoverCompleted:
		set(v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonFailedOver, "the mirror failed over: its topics are no longer synced")
	case v1alpha1.FailoverFailed:
		set(v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed, "the topics are not synced: the failover failed and the mirror stays stopped")
	default:
		set(v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonFailingOver, "the topics are not synced during a failover")
	}
	switch f.Phase {
	case v1alpha1.FailoverCompleted:
		set(v1alpha1.ConditionFailedOver, metav1.ConditionTrue, v1alpha1.ReasonFailedOver, f.Message)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailedOver, f.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonFailedOver, "the failover completed; the mirror stays stopped")
	case v1alpha1.FailoverFailed:
		set(v1alpha1.ConditionFailedOver, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed, f.Message)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed, f.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed, "the failover failed; delete its Job to run it again")
	default:
		msg := fmt.Sprintf("failover %s: %s", f.Phase, f.Message)
		set(v1alpha1.ConditionFailedOver, metav1.ConditionFalse, v1alpha1.ReasonFailingOver, msg)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailingOver, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonFailingOver, msg)
	}
}
