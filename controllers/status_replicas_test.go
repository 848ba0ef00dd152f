package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// setDeploymentReplicas plays the Deployment controller: n pods exist, ready of them ready.
func setDeploymentReplicas(t *testing.T, ns, name string, n, ready int32) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, name); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: ready, ReadyReplicas: ready, AvailableReplicas: ready}
		return env.client.Status().Update(context.Background(), d)
	})
}

// TestStatusReplicasObserved: status.replicas, and the scale subresource that reads
// it, follow the pods the Deployment has, not spec.replicas.
func TestStatusReplicasObserved(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-replicas", "observed"
	create(t, testMirror(ns, name, `observed\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)

	// replicas and readyReplicas as the KafkaMirror and its scale subresource report them.
	reported := func() ([3]int32, error) {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return [3]int32{}, err
		}
		scale := &autoscalingv1.Scale{}
		if err := env.client.SubResource("scale").Get(context.Background(), m, scale); err != nil {
			return [3]int32{}, err
		}
		return [3]int32{m.Status.Replicas, m.Status.ReadyReplicas, scale.Status.Replicas}, nil
	}
	for _, step := range []struct {
		name        string
		pods, ready int32
	}{
		{"rollout surge: old and new pod", 2, 1},
		{"rolled out", 1, 1},
		{"pod evicted, replacement not created yet", 0, 0},
	} {
		setDeploymentReplicas(t, ns, name+"-mirror", step.pods, step.ready)
		want := [3]int32{step.pods, step.ready, step.pods}
		testutil.Eventually(t, 90*time.Second, func() error {
			got, err := reported()
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s: status replicas/readyReplicas/scale replicas = %v, want %v (spec.replicas is 1)", step.name, got, want)
			}
			return nil
		})
	}
}
