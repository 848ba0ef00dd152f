package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestValidateCustomImageHandlers: a mirror running its own image may name handlers and
// listeners that only that image registers; the operator leaves those names to the
// engine but still checks everything else. With the stock image the same names stall.
func TestValidateCustomImageHandlers(t *testing.T) {
	custom := func(m *v1alpha1.KafkaMirror) {
		m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "redact-email"}}
		m.Spec.RebalanceListener = &v1alpha1.PluginSpec{Name: "audit-listener"}
	}
	tests := map[string]struct {
		image  string
		mutate func(*v1alpha1.KafkaMirror)
		want   []string // problems expected, in order; none means valid
	}{
		"stock image, unknown names stall": {
			mutate: custom,
			want: []string{
				`spec.handlers[0].name: unknown handler "redact-email"`,
				`spec.rebalanceListener.name: unknown rebalance listener "audit-listener"`,
			},
		},
		"custom image, unknown names left to the engine": {
			image:  "registry.example/team/kafka-mirror:1.0",
			mutate: custom,
		},
		"custom image, a bad built-in's args still stall": {
			image: "registry.example/team/kafka-mirror:1.0",
			mutate: func(m *v1alpha1.KafkaMirror) {
				custom(m)
				m.Spec.Handlers = append(m.Spec.Handlers, v1alpha1.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "sideways"}})
			},
			want: []string{`spec.handlers[1].args.`},
		},
		"custom image, a CEL compile error still stalls": {
			image: "registry.example/team/kafka-mirror:1.0",
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{Filter: "record.nope ==="}}}
			},
			want: []string{`spec.handlers[0].cel.filter: `},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := celMirror("custom", tc.mutate)
			m.Spec.Pod.Image = tc.image
			_, err := validate(m)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("validate() = %v, want no problems", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate() = nil, want problems %q", tc.want)
			}
			se, ok := err.(*specError)
			if !ok {
				t.Fatalf("validate() error is %T, want *specError", err)
			}
			if len(se.problems) != len(tc.want) {
				t.Fatalf("problems = %q, want %d starting with %q", se.problems, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(se.problems[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, se.problems[i], w)
				}
			}
		})
	}
}

// TestValidatePodOptions: user volumes and mounts cannot take the operator's names and
// paths, mounts name a declared volume, and the grace period leaves room for the drain.
func TestValidatePodOptions(t *testing.T) {
	vol := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	tests := map[string]struct {
		pod  v1alpha1.MirrorPodSpec
		want []string
	}{
		"own volume and mount": {pod: v1alpha1.MirrorPodSpec{
			Volumes: []corev1.Volume{vol("cache")}, VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/var/cache/mirror"}},
			TerminationGracePeriodSeconds: ptr.To[int64](120)}},
		"operator volume names": {
			pod:  v1alpha1.MirrorPodSpec{Volumes: []corev1.Volume{vol("config"), vol("ok"), vol("target-ca")}},
			want: []string{`spec.pod.volumes[0].name: Invalid value: "config"`, `spec.pod.volumes[2].name: Invalid value: "target-ca"`},
		},
		"mount of an undeclared volume, and over the operator's paths": {
			pod: v1alpha1.MirrorPodSpec{Volumes: []corev1.Volume{vol("x")}, VolumeMounts: []corev1.VolumeMount{
				{Name: "missing", MountPath: "/data"}, {Name: "x", MountPath: "/etc/kafka-mirror/secrets/"}, {Name: "x", MountPath: "/tmp"}}},
			want: []string{`spec.pod.volumeMounts[0].name: Not found: "missing"`,
				`spec.pod.volumeMounts[1].mountPath: Invalid value: "/etc/kafka-mirror/secrets/"`,
				`spec.pod.volumeMounts[2].mountPath: Invalid value: "/tmp"`},
		},
		"grace period shorter than the delivery timeout": {
			pod:  v1alpha1.MirrorPodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30)},
			want: []string{`spec.pod.terminationGracePeriodSeconds: Invalid value: 30: must be at least deliveryTimeout (2m0s)`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMirror()
			m.Spec.Pod = tc.pod
			got := PodProblems(m)
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, got[i], w)
				}
			}
			if _, err := validate(m); (err == nil) != (len(tc.want) == 0) {
				t.Errorf("validate() = %v, want problems %v", err, len(tc.want) > 0)
			}
		})
	}
}
