package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

const (
	// podsToInspect bounds how many mirror pods one reconcile lists to explain a
	// Deployment that is not ready.
	podsToInspect = 50
	// maxProblemMessage bounds the part of a termination or kubelet message copied into
	// the Ready condition.
	maxProblemMessage = 300
)

// podProblem is why a mirror Deployment is not ready, when it is something a person
// must fix rather than pods still starting.
type podProblem struct {
	reason  string // a v1alpha1.Reason* value
	message string
}

// imagePullReasons are the kubelet's waiting reasons for an image that cannot be pulled.
var imagePullReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
}

// diagnosePods explains a Deployment that is not ready from its pods and its own
// conditions. It lists the pods uncached (the operator keeps no Pod cache) and only when
// d is not ready, so a healthy fleet costs nothing. nil means "still starting".
//
// A Deployment whose status has never been written (observedGeneration 0) has not been
// acted on by the Deployment controller yet: it has no ReplicaSet and so no pods, and
// nothing is listed. That is every Deployment in the reconcile that creates it.
func diagnosePods(ctx context.Context, r client.Reader, m *v1alpha1.KafkaMirror, d *appsv1.Deployment) (*podProblem, error) {
	if d != nil && d.Status.ObservedGeneration == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	err := r.List(ctx, &pods, client.InNamespace(m.Namespace),
		client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(selectorLabels(m))}, client.Limit(podsToInspect))
	if err != nil {
		return nil, fmt.Errorf("while listing the mirror pods: %w", err)
	}
	if p := podsProblem(pods.Items); p != nil {
		return p, nil
	}
	return rolloutProblem(d), nil
}

// podsProblem returns the first problem among pods, in order of what blocks most: an
// image that cannot be pulled, a crash loop, a pod that fits nowhere.
func podsProblem(pods []corev1.Pod) *podProblem {
	var crash, unschedulable *podProblem
	for i := range pods {
		pod := &pods[i]
		for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			w := cs.State.Waiting
			switch {
			case w != nil && imagePullReasons[w.Reason]:
				return &podProblem{v1alpha1.ReasonImagePull, fmt.Sprintf("pod %s: image %s: %s: %s",
					pod.Name, cs.Image, w.Reason, clip(w.Message))}
			case w != nil && w.Reason == "CrashLoopBackOff" && crash == nil:
				crash = &podProblem{v1alpha1.ReasonCrashLoop, fmt.Sprintf("pod %s: container %s restarted %d times; %s",
					pod.Name, cs.Name, cs.RestartCount, lastTermination(cs))}
			}
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && unschedulable == nil {
				unschedulable = &podProblem{v1alpha1.ReasonUnschedulable, fmt.Sprintf("pod %s: %s", pod.Name, clip(c.Message))}
			}
		}
	}
	if crash != nil {
		return crash
	}
	return unschedulable
}

// lastTermination describes how a container last ended: its termination message (the
// engine writes its fatal error there, or the kubelet takes the log's tail), else its
// exit code and reason.
func lastTermination(cs corev1.ContainerStatus) string {
	t := cs.LastTerminationState.Terminated
	if t == nil {
		return "no termination recorded yet"
	}
	if msg := strings.TrimSpace(t.Message); msg != "" {
		return fmt.Sprintf("last exit code %d: %s", t.ExitCode, clip(msg))
	}
	return fmt.Sprintf("last exit code %d (%s)", t.ExitCode, t.Reason)
}

// rolloutProblem reports a Deployment whose rollout passed its progress deadline.
func rolloutProblem(d *appsv1.Deployment) *podProblem {
	if d == nil {
		return nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return &podProblem{v1alpha1.ReasonRolloutStuck, "the mirror Deployment's rollout passed its progress deadline: " + clip(c.Message)}
		}
	}
	return nil
}

// clip keeps the last line of msg (a log tail ends with the fatal error) within
// maxProblemMessage characters.
func clip(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[i+1:])
	}
	if len(msg) > maxProblemMessage {
		msg = msg[:maxProblemMessage] + "..."
	}
	return msg
}
