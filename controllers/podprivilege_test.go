package controllers

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestRefusePrivilegedPods: with --refuse-privileged-pods a KafkaMirror whose pod settings
// go beyond the restricted Pod Security Standard is refused (Stalled,
// PrivilegedPodNotAllowed) with every field path; without it, and for a mirror that keeps
// the operator's defaults, nothing is refused.
func TestRefusePrivilegedPods(t *testing.T) {
	privileged := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Pod.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "SYS_ADMIN"}}}
		m.Spec.Pod.PodSecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))}
		m.Spec.Pod.Volumes = []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
		}
		m.Spec.Pod.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
	})
	c := &renderedConfigs{refusePrivileged: true}
	_, err := c.validate(privileged)
	var na *notAllowedError
	if !errors.As(err, &na) || na.reason != v1alpha1.ReasonPrivilegedPodNotAllowed {
		t.Fatalf("validate = %v, want a PrivilegedPodNotAllowed refusal", err)
	}
	for _, path := range []string{"spec.pod.securityContext.privileged", "spec.pod.securityContext.capabilities.add[1]",
		"spec.pod.podSecurityContext.runAsUser", "spec.pod.volumes[1]"} {
		if !strings.Contains(err.Error(), path+":") {
			t.Errorf("refusal %q does not name %s", err, path)
		}
	}
	for _, allowed := range []string{"capabilities.add[0]", "volumes[0]"} {
		if strings.Contains(err.Error(), allowed) {
			t.Errorf("refusal %q names %s, which the restricted standard allows", err, allowed)
		}
	}
	if _, err := (&renderedConfigs{}).validate(privileged); err != nil {
		t.Errorf("without --refuse-privileged-pods: %v", err)
	}
	if _, err := (&renderedConfigs{refusePrivileged: true}).validate(newMirror(withSecrets)); err != nil {
		t.Errorf("a mirror with the operator's pod defaults was refused: %v", err)
	}
	m := newMirror()
	m.Generation = 1
	st := computeStatus(m, &observation{invalid: na})
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); cond == nil || cond.Reason != v1alpha1.ReasonPrivilegedPodNotAllowed || cond.Status != "True" {
		t.Errorf("Stalled = %+v, want True with reason PrivilegedPodNotAllowed", cond)
	}
}
