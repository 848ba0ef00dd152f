package controllers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestRackAndPodOptionsReachTheAPIServer: a mirror with spec.rack and the fleet pod
// options becomes a Deployment the API server accepts (the downward API field path,
// the spread constraints, the extra volume), and the rendered config reads the rack
// from the environment variable the pod gets from its zone label.
func TestRackAndPodOptionsReachTheAPIServer(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-podoptions", "zoned"
	create(t, testMirror(ns, name, `zoned\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Rack = &v1alpha1.RackSpec{}
		m.Spec.ChildMetadata = &v1alpha1.ChildMetadata{Labels: map[string]string{"cost-center": "data"}}
		m.Spec.Pod = v1alpha1.MirrorPodSpec{
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: defaultRackTopologyKey,
				WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelInstance: name}}}},
			Env:                           []corev1.EnvVar{{Name: "GODEBUG", Value: "http2client=0"}},
			Volumes:                       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			VolumeMounts:                  []corev1.VolumeMount{{Name: "scratch", MountPath: "/var/scratch"}},
			TerminationGracePeriodSeconds: ptr.To[int64](400),
		}
	}))
	d, cm := &appsv1.Deployment{}, &corev1.ConfigMap{}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(d, ns, name+"-mirror"); err != nil {
			return err
		}
		return get(cm, ns, name+"-mirror-config")
	})
	c := d.Spec.Template.Spec.Containers[0]
	expect(t, "env names", []string{c.Env[0].Name, c.Env[1].Name, c.Env[2].Name}, []string{podNameEnv, rackEnv, "GODEBUG"})
	expect(t, "pod name from the downward API", c.Env[0].ValueFrom.FieldRef.FieldPath, "metadata.name")
	expect(t, "rack from the zone label", c.Env[1].ValueFrom.FieldRef.FieldPath, "metadata.labels['topology.kubernetes.io/zone']")
	expect(t, "spread", d.Spec.Template.Spec.TopologySpreadConstraints[0].TopologyKey, defaultRackTopologyKey)
	expect(t, "grace", *d.Spec.Template.Spec.TerminationGracePeriodSeconds, int64(400))
	expect(t, "child label", d.Labels["cost-center"], "data")
	cfg, err := config.Parse([]byte(cm.Data["mirror.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "source.rack", cfg.Source.Rack, "${"+rackEnv+"}")
	expect(t, "target.rack", cfg.Target.Rack, "")
}
