package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// declareFailover sets spec.failover on the KafkaMirror ns/name, as
// `kubectl patch kafkamirror <name> --type merge -p '{"spec":{"failover":{...}}}'` does.
func declareFailover(t *testing.T, ns, name string, f v1alpha1.FailoverSpec) {
	t.Helper()
	m := &v1alpha1.KafkaMirror{}
	if err := get(m, ns, name); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Failover = &f
	if err := env.client.Patch(context.Background(), m, patch); err != nil {
		t.Fatalf("while declaring the failover: %v", err)
	}
}

// waitFailoverPhase waits until status.failover.phase is phase and returns the mirror.
func waitFailoverPhase(t *testing.T, ns, name string, phase v1alpha1.FailoverPhase) *v1alpha1.KafkaMirror {
	t.Helper()
	m := &v1alpha1.KafkaMirror{}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(m, ns, name); err != nil {
			return err
		}
		if f := m.Status.Failover; f == nil || f.Phase != phase {
			return fmt.Errorf("status.failover is %+v, want phase %s", f, phase)
		}
		return nil
	})
	return m
}

// testPod is a pod with one container named like the mirror's, labelled lbls and
// controlled by owner when it is not nil.
func testPod(ns, name string, lbls map[string]string, owner client.Object, kind string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: testImage}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	}
	return p
}

// finishFailoverJob plays the Job controller and the kubelet, which envtest does not
// run: the Job's pod exits with message as its termination message, and the Job is
// marked Complete (failed false) or Failed.
func finishFailoverJob(t *testing.T, job *batchv1.Job, podName, message string, failed bool) {
	t.Helper()
	reason := ""
	if failed {
		reason = batchv1.JobReasonBackoffLimitExceeded
	}
	endFailoverJob(t, job, podName, message, reason)
}

// endFailoverJob is finishFailoverJob with the Job controller's reason for a failure
// (BackoffLimitExceeded, DeadlineExceeded); "" completes the Job.
func endFailoverJob(t *testing.T, job *batchv1.Job, podName, message, failReason string) {
	t.Helper()
	failed := failReason != ""
	ctx := context.Background()
	pod := testPod(job.Namespace, podName, map[string]string{jobNameLabel: job.Name}, job, "Job")
	create(t, pod)
	exit := int32(0)
	if failed {
		exit = 1
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	if failed {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: containerName, Image: testImage, ImageID: "docker://sha256:0",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: exit, Message: message, StartedAt: now, FinishedAt: now,
		}},
	}}
	if err := env.client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("while setting the failover pod's status: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		j := &batchv1.Job{}
		if err := get(j, job.Namespace, job.Name); err != nil {
			return err
		}
		j.Status.StartTime = &now
		cond := func(typ batchv1.JobConditionType, reason string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: now, LastTransitionTime: now}
		}
		if failed {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, failReason), cond(batchv1.JobFailed, failReason)}
		} else {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached")}
		}
		return env.client.Status().Update(ctx, j)
	})
}

// waitFailoverJob waits for the failover Job of ns/name and returns it.
func waitFailoverJob(t *testing.T, ns, name string, notUID string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(job, ns, name+"-failover"); err != nil {
			return err
		}
		if string(job.UID) == notUID {
			return fmt.Errorf("the failover Job is still the old one")
		}
		return nil
	})
	return job
}

// TestFailoverPhases: spec.failover scales the mirror to 0, waits for its pods to be
// gone, runs the failover Job with the pod's config, Secrets and security context, and
// turns the Job's termination message into status.failover; the mirror stays stopped.
func TestFailoverPhases(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, name = "t-failover", "planned"
	create(t, testMirror(ns, name, `planned\..*`, withSecrets))
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	mirrorPod := testPod(ns, name+"-mirror-0", selectorLabels(testMirror(ns, name, "")), nil, "")
	create(t, mirrorPod)

	declareFailover(t, ns, name, v1alpha1.FailoverSpec{Mode: "planned", Timeout: &metav1.Duration{Duration: 10 * time.Minute}})
	m := waitFailoverPhase(t, ns, name, v1alpha1.FailoverStopping)
	if m.Status.Failover.StartTime == nil || !strings.Contains(m.Status.Failover.Message, "1 mirror pods") {
		t.Fatalf("Stopping: status.failover is %+v, want a start time and the pod count", m.Status.Failover)
	}
	d := &appsv1.Deployment{}
	if err := get(d, ns, name+"-mirror"); err != nil || *d.Spec.Replicas != 0 {
		t.Fatalf("Stopping: the Deployment has %v replicas (%v), want 0", d.Spec.Replicas, err)
	}
	if err := get(&batchv1.Job{}, ns, name+"-failover"); !apierrors.IsNotFound(err) {
		t.Fatalf("Stopping: the failover Job exists (%v) while a mirror pod runs", err)
	}

	// The pod drained, committed and exited.
	if err := env.client.Delete(ctx, mirrorPod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	job := waitFailoverJob(t, ns, name, "")
	waitFailoverPhase(t, ns, name, v1alpha1.FailoverRunning)
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailingOver)

	spec := job.Spec.Template.Spec
	c := spec.Containers[0]
	wantArgs := []string{"failover", "--config", configPath, "--mode", "planned", "-o", "json",
		"--termination-log", "/dev/termination-log", "--log-format", "json", "--timeout", "10m0s"}
	expect(t, "args", c.Args, wantArgs)
	expect(t, "backoffLimit", *job.Spec.BackoffLimit, int32(0))
	expect(t, "restartPolicy", spec.RestartPolicy, corev1.RestartPolicyNever)
	expect(t, "terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageFallbackToLogsOnError)
	expect(t, "image", c.Image, d.Spec.Template.Spec.Containers[0].Image)
	expect(t, "volumes", spec.Volumes, d.Spec.Template.Spec.Volumes)
	expect(t, "mounts", c.VolumeMounts, d.Spec.Template.Spec.Containers[0].VolumeMounts)
	expect(t, "pod security context", spec.SecurityContext, d.Spec.Template.Spec.SecurityContext)
	expect(t, "container security context", c.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext)
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil }) {
		t.Errorf("the failover pod mounts no Secret: %+v", spec.Volumes)
	}
	if labels.SelectorFromSet(selectorLabels(m)).Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("the failover pod's labels %v match the mirror's selector: it would count as a mirror pod", job.Spec.Template.Labels)
	}
	if owner := metav1.GetControllerOf(job); owner == nil || owner.Kind != "KafkaMirror" || owner.Name != name {
		t.Errorf("the failover Job's controller is %+v, want the KafkaMirror", owner)
	}

	cutover := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	report := &mirror.FailoverReport{
		Mode: mirror.FailoverPlanned, Mirror: name, Completed: true, SourceReachable: true, CutoverAt: &cutover,
		Partitions: []mirror.FailoverPartition{
			{Topic: "planned.orders", Partition: 0, SourceEnd: ptr.To[int64](40), Committed: 40, LeftBehind: ptr.To[int64](0), TargetEnd: 40},
			{Topic: "planned.orders", Partition: 1, SourceEnd: ptr.To[int64](7), Committed: 7, LeftBehind: ptr.To[int64](0), TargetEnd: 9},
		},
		Groups: []mirror.FailoverGroup{{Group: "app", Partitions: []mirror.FailoverGroupPartition{
			{Topic: "planned.orders", Partition: 0, Exact: true, Committed: true},
			{Topic: "planned.orders", Partition: 1, Exact: true, Committed: true},
		}}},
	}
	_, summary := report.Summarize()
	finishFailoverJob(t, job, name+"-failover-abcde", string(summary), false)

	m, cond := waitCondition(t, ns, name, v1alpha1.ConditionFailedOver, metav1.ConditionTrue, v1alpha1.ReasonFailedOver)
	f := m.Status.Failover
	if f.Phase != v1alpha1.FailoverCompleted || f.CompletionTime == nil || f.StartTime == nil || f.Report == nil {
		t.Fatalf("status.failover is %+v, want Completed with times and a report", f)
	}
	expect(t, "FailedOver message", cond.Message, "planned failover completed: 0 records left behind in 2 partitions; cutover at 2026-12-04T06:00:00Z; the mirror stays stopped")
	if f.Report.CutoverTime != nil {
		f.Report.CutoverTime.Time = f.Report.CutoverTime.UTC() // read back in local time
	}
	expect(t, "report", *f.Report, v1alpha1.FailoverReport{
		CutoverTime: &metav1.Time{Time: cutover}, SourceReachable: true, Partitions: 2,
		PartitionDetails: []v1alpha1.FailoverPartitionReport{
			{Topic: "planned.orders", Partition: 0, SourceEnd: ptr.To[int64](40), Committed: 40, LeftBehind: ptr.To[int64](0), TargetEnd: 40},
			{Topic: "planned.orders", Partition: 1, SourceEnd: ptr.To[int64](7), Committed: 7, LeftBehind: ptr.To[int64](0), TargetEnd: 9},
		},
		GroupDetails: []v1alpha1.FailoverGroupReport{{Group: "app", Partitions: 2, Committed: 2, Exact: 2}},
	})
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailedOver)
	if err := get(d, ns, name+"-mirror"); err != nil || *d.Spec.Replicas != 0 {
		t.Fatalf("Completed: the Deployment has %v replicas (%v), want 0", d.Spec.Replicas, err)
	}
}

// TestFailoverFailed: a failed Job fails the failover with the engine's error; deleting
// the Job runs the failover again.
func TestFailoverFailed(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-failover", "failed"
	create(t, testMirror(ns, name, `failed\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	declareFailover(t, ns, name, v1alpha1.FailoverSpec{Mode: "immediate"})
	// No mirror pod runs (envtest has no Deployment controller): straight to Running.
	job := waitFailoverJob(t, ns, name, "")
	expect(t, "args", job.Spec.Template.Spec.Containers[0].Args, []string{"failover", "--config", configPath, "--mode", "immediate", "-o", "json",
		"--termination-log", "/dev/termination-log", "--log-format", "json"})

	const why = "the source grew past the timeout: failed.orders/0 is 12 records behind"
	_, summary := (&mirror.FailoverReport{Mode: mirror.FailoverImmediate, Mirror: name, Error: why}).Summarize()
	finishFailoverJob(t, job, name+"-failover-abcde", string(summary), true)
	m, cond := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed)
	expect(t, "Ready message", cond.Message, why)
	if f := m.Status.Failover; f.Phase != v1alpha1.FailoverFailed || f.Message != why || f.CompletionTime == nil {
		t.Fatalf("status.failover is %+v, want Failed with the engine's error", f)
	}

	// Deleting the Job runs the failover again.
	if err := env.client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	waitFailoverJob(t, ns, name, string(job.UID))
	m = waitFailoverPhase(t, ns, name, v1alpha1.FailoverRunning)
	if m.Status.Failover.CompletionTime != nil || m.Status.Failover.Report != nil {
		t.Fatalf("the retried failover keeps the failed run's outcome: %+v", m.Status.Failover)
	}
}

// TestFailoverIsFinal: once declared, spec.failover cannot be changed or removed; it
// can be added to a running mirror.
func TestFailoverIsFinal(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const changed = "failover is immutable once set"
	const removed = "failover cannot be removed once set"
	planned := &v1alpha1.FailoverSpec{Mode: "planned"}
	tests := map[string]struct {
		initial, updated *v1alpha1.FailoverSpec
		wantErr          string
	}{
		"mode changed":   {initial: planned, updated: &v1alpha1.FailoverSpec{Mode: "immediate"}, wantErr: changed},
		"timeout added":  {initial: planned, updated: &v1alpha1.FailoverSpec{Mode: "planned", Timeout: &metav1.Duration{Duration: time.Minute}}, wantErr: changed},
		"removed":        {initial: planned, updated: nil, wantErr: removed},
		"kept":           {initial: planned, updated: planned},
		"declared later": {initial: nil, updated: planned},
	}
	i := 0
	for name, tc := range tests {
		i++
		m := celMirror(fmt.Sprintf("failover-%d", i), func(m *v1alpha1.KafkaMirror) { m.Spec.Failover = tc.initial })
		t.Run(name, func(t *testing.T) {
			create(t, m)
			m.Spec.Failover = tc.updated
			m.Spec.Streams = 2 // a change that is always allowed
			err := env.client.Update(context.Background(), m)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("update returned %v, want %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("update rejected: %v", err)
			}
		})
	}
	m := celMirror("failover-mode", func(m *v1alpha1.KafkaMirror) { m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "sideways"} })
	if err := env.client.Create(context.Background(), m); err == nil || !strings.Contains(err.Error(), "spec.failover.mode") {
		t.Fatalf("mode sideways: create returned %v, want a refusal at spec.failover.mode", err)
	}
}

// TestFailoverJobDeadline: the failover Job carries a deadline (the engine's timeout
// plus a margin for the pod to start), and a Job the Job controller stopped at it
// fails the failover saying so, with the end of the pod's output. TopicsSynced follows
// the failover: the topics are not synced while it runs nor after it failed.
func TestFailoverJobDeadline(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-failover"
	tests := map[string]struct {
		name     string
		failover v1alpha1.FailoverSpec
		want     int64
	}{
		"planned with a timeout": {name: "deadline-planned", failover: v1alpha1.FailoverSpec{Mode: "planned", Timeout: &metav1.Duration{Duration: 2 * time.Minute}}, want: 7 * 60},
		"planned by default":     {name: "deadline-default", failover: v1alpha1.FailoverSpec{Mode: "planned"}, want: 10 * 60},
		"immediate by default":   {name: "deadline-immediate", failover: v1alpha1.FailoverSpec{Mode: "immediate"}, want: 10*30 + 5*60},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			create(t, testMirror(ns, tc.name, tc.name+`\..*`))
			waitCondition(t, ns, tc.name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)
			declareFailover(t, ns, tc.name, tc.failover)
			job := waitFailoverJob(t, ns, tc.name, "")
			if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != tc.want {
				t.Fatalf("activeDeadlineSeconds is %v, want %d", d, tc.want)
			}
		})
	}

	// The Job controller stops the Job at its deadline: the pod is killed, the kubelet
	// keeps the tail of its log as the termination message.
	const name = "deadline-planned"
	job := waitFailoverJob(t, ns, name, "")
	const tail = `{"level":"info","msg":"Waited for the mirror to drain","behind":3}`
	endFailoverJob(t, job, name+"-failover-abcde", tail, batchv1.JobReasonDeadlineExceeded)
	m, cond := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonFailoverFailed)
	want := "the failover Job deadline-planned-failover passed its deadline of 7m0s (spec.failover.timeout 2m0s plus 5m0s for the pod to start) and was stopped; " +
		"delete the Job to run the failover again; its last output: " + tail
	expect(t, "Ready message", cond.Message, want)
	if f := m.Status.Failover; f.Phase != v1alpha1.FailoverFailed || f.Message != want || f.CompletionTime == nil {
		t.Fatalf("status.failover is %+v, want Failed at the deadline", f)
	}
}

// TestTopicsSyncedDuringFailover: the topic sync stops with a declared failover, and
// TopicsSynced says so (it kept saying "in sync" from the last sync before): False
// while the failover runs, and after it completed or failed.
func TestTopicsSyncedDuringFailover(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-failover"
	for name, failed := range map[string]bool{"topics-completed": false, "topics-failed": true} {
		t.Run(name, func(t *testing.T) {
			create(t, testMirror(ns, name, name+`\..*`))
			waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)
			declareFailover(t, ns, name, v1alpha1.FailoverSpec{Mode: "immediate"})
			job := waitFailoverJob(t, ns, name, "")
			_, cond := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonFailingOver)
			expect(t, "TopicsSynced message while failing over", cond.Message, "the topics are not synced during a failover")

			report := &mirror.FailoverReport{Mode: mirror.FailoverImmediate, Mirror: name, Completed: !failed}
			reason, want := v1alpha1.ReasonFailedOver, "the mirror failed over: its topics are no longer synced"
			if failed {
				report.Error = "the target did not answer"
				reason, want = v1alpha1.ReasonFailoverFailed, "the topics are not synced: the failover failed and the mirror stays stopped"
			}
			_, summary := report.Summarize()
			finishFailoverJob(t, job, name+"-failover-abcde", string(summary), failed)
			_, cond = waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, reason)
			expect(t, "TopicsSynced message after the failover", cond.Message, want)
		})
	}
}
