package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestReadyNamesWhatBlocksThePods: a mirror whose pods cannot pull their image, crash in a
// loop, fit on no node, or whose rollout passed its deadline is Ready=False with a reason
// that names it (and the engine's last error), not DeploymentNotReady forever. The kubelet
// and the Deployment controller are played by writing Pod and Deployment status.
func TestReadyNamesWhatBlocksThePods(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-podhealth", "blocked"
	m := testMirror(ns, name, `blocked\..*`)
	create(t, m)
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)
	setDeploymentReplicas(t, ns, name+"-mirror", 1, 0)
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-mirror-7d9f-x2x4q", Labels: selectorLabels(m)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "mirror", Image: "registry.example/kafka-mirror:v9"}}},
	}
	create(t, pod)
	setPodStatus := func(st corev1.PodStatus) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			p := &corev1.Pod{}
			if err := get(p, ns, pod.Name); err != nil {
				return err
			}
			p.Status = st
			return env.client.Status().Update(context.Background(), p)
		})
	}
	// nudge changes an annotation so the next reconcile comes now rather than at the
	// not-ready recheck (the first case below waits for the recheck on purpose).
	nudge := func(v string) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			cur := &v1alpha1.KafkaMirror{}
			if err := get(cur, ns, name); err != nil {
				return err
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations["test.kafkamirror.io/nudge"] = v
			return env.client.Update(context.Background(), cur)
		})
	}
	expectReady := func(reason string, parts ...string) {
		t.Helper()
		_, c := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, reason)
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				t.Errorf("Ready %s message %q does not contain %q", reason, c.Message, p)
			}
		}
	}
	waiting := func(reason, msg string, restarts int32, last *corev1.ContainerStateTerminated) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "mirror", Image: "registry.example/kafka-mirror:v9", RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}
	}

	// No watched object changes when a pod cannot pull: found by the not-ready recheck
	// (or a reconcile already queued), without a nudge.
	setPodStatus(waiting("ImagePullBackOff", `Back-off pulling image "registry.example/kafka-mirror:v9"`, 0, nil))
	expectReady(v1alpha1.ReasonImagePull, pod.Name, "registry.example/kafka-mirror:v9", "ImagePullBackOff")

	setPodStatus(waiting("CrashLoopBackOff", "back-off 40s restarting failed container", 4, &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error",
		Message: "{\"level\":\"info\",\"msg\":\"Starting\"}\nkafka-mirror: while connecting to the target cluster [t:9093]: SASL authentication failed",
	}))
	nudge("crash")
	expectReady(v1alpha1.ReasonCrashLoop, "restarted 4 times", "last exit code 1", "SASL authentication failed")

	setPodStatus(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient memory.",
	}}})
	nudge("unschedulable")
	expectReady(v1alpha1.ReasonUnschedulable, "3 Insufficient memory")

	// Pods look fine but the rollout passed its deadline.
	setPodStatus(corev1.PodStatus{Phase: corev1.PodRunning})
	testutil.Eventually(t, 90*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, name+"-mirror"); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "blocked-mirror-7d9f" has timed out progressing.`}}}
		return env.client.Status().Update(context.Background(), d)
	})
	expectReady(v1alpha1.ReasonRolloutStuck, "progress deadline", "has timed out progressing")

	// Once the pods are ready, Ready follows.
	markDeploymentReady(t, ns, name+"-mirror")
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAvailable)
}

func TestClipKeepsTheLastLine(t *testing.T) {
	long := strings.Repeat("x", maxProblemMessage+50)
	tests := map[string]struct{ in, want string }{
		"one line":                   {"error: refused\n", "error: refused"},
		"log tail ends in the error": {"{\"msg\":\"Starting\"}\n{\"msg\":\"Mirroring\"}\nkafka-mirror: fatal", "kafka-mirror: fatal"},
		"too long":                   {long, long[:maxProblemMessage] + "..."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := clip(tc.in); got != tc.want {
				t.Fatalf("clip(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
