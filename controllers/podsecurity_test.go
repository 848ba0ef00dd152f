package controllers

import (
	"context"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestPodsPassRestrictedPodSecurity: the mirror pods and the operator's own pod
// (config/manager) are admitted in a namespace that enforces the "restricted" Pod
// Security Standard. envtest runs no Deployment controller, so the test creates pods
// from the Deployments' templates itself.
func TestPodsPassRestrictedPodSecurity(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-psa"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}})

	data, err := os.ReadFile("../config/manager/manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var operator *appsv1.Deployment
	for _, doc := range strings.Split(string(data), "\n---\n") {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal([]byte(doc), d); err == nil && d.Kind == "Deployment" {
			operator = d
		}
	}
	if operator == nil {
		t.Fatal("no Deployment in config/manager/manager.yaml")
	}

	mirror := mirrorDeployment(newMirror(withSecrets), testImage, "hash")
	withCapability := mirror.Spec.Template.Spec.DeepCopy()
	withCapability.Containers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}

	// OpenShift's restricted-v2 SCC assigns the IDs: --pin-user-id=false leaves them unset.
	unpinned := mirror.Spec.Template.Spec.DeepCopy()
	unpinUserID(unpinned)
	if sc := unpinned.SecurityContext; sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil || !*sc.RunAsNonRoot {
		t.Fatalf("unpinned pod security context %+v: want no user, group or fsGroup, runAsNonRoot kept", sc)
	}
	if sc := mirror.Spec.Template.Spec.SecurityContext; *sc.RunAsUser != runAsUser || *sc.RunAsGroup != runAsUser || *sc.FSGroup != runAsUser {
		t.Fatalf("pinned pod security context %+v: want user, group and fsGroup %d", sc, runAsUser)
	}
	// The same, per mirror: spec.pod.podSecurityContext without IDs.
	perMirror := mirrorDeployment(newMirror(withSecrets, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Pod.PodSecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}), testImage, "hash")
	tests := map[string]struct {
		spec      corev1.PodSpec
		wantAdmit bool
	}{
		"mirror pod with a per-mirror security context without IDs": {spec: perMirror.Spec.Template.Spec, wantAdmit: true},
		"mirror pod":                    {spec: mirror.Spec.Template.Spec, wantAdmit: true},
		"mirror pod with user ID unset": {spec: *unpinned, wantAdmit: true},
		"operator pod":                  {spec: operator.Spec.Template.Spec, wantAdmit: true},
		// Proves the namespace really enforces the standard.
		"pod adding a capability": {spec: *withCapability, wantAdmit: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "psa-"}, Spec: tc.spec}
			pod.Spec.ServiceAccountName = ""
			err := env.client.Create(context.Background(), pod)
			switch {
			case tc.wantAdmit && err != nil:
				t.Fatalf("rejected: %v", err)
			case !tc.wantAdmit && (err == nil || !strings.Contains(err.Error(), "violates PodSecurity")):
				t.Fatalf("admitted or rejected for another reason: %v", err)
			}
		})
	}
}
