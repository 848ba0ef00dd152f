package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestAutoscalerOnTheDeployment: without spec.autoscaling, a HorizontalPodAutoscaler
// (or KEDA's, for a ScaledObject) aimed at the mirror's Deployment is reported
// (Stalled, AutoscalerConflict, with both fixes), and the operator no longer takes the
// replicas back from it, also in reconciles after the autoscaler scaled; removing it
// ends the conflict and spec.replicas applies again.
func TestAutoscalerOnTheDeployment(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, name, deployment = "t-hpa", "hpa-on-deployment", "hpa-on-deployment-mirror"
	create(t, testMirror(ns, name, `hpadeploy\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, ns, deployment) })

	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keda-hpa-" + name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 6,
		},
	}
	create(t, hpa)
	_, c := waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonAutoscalerConflict)
	for _, want := range []string{"HorizontalPodAutoscaler keda-hpa-" + name, "scaleTargetRef", "KafkaMirror", "spec.autoscaling"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the Stalled message does not say %q: %s", want, c.Message)
		}
	}

	// The autoscaler scales the Deployment, as the HPA controller would.
	testutil.Eventually(t, 90*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, deployment); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](4)
		return env.client.Update(ctx, d)
	})
	for range 2 {
		if c := reconciledAgain(t, ns, name); c.Reason != v1alpha1.ReasonAutoscalerConflict {
			t.Fatalf("Stalled is %s/%s, want True/AutoscalerConflict", c.Status, c.Reason)
		}
		d := &appsv1.Deployment{}
		if err := get(d, ns, deployment); err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 4 {
			t.Fatalf("the operator took the autoscaler's replicas back: %d, want 4", *d.Spec.Replicas)
		}
	}

	if err := env.client.Delete(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	testutil.Eventually(t, 90*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, deployment); err != nil {
			return err
		}
		if *d.Spec.Replicas != 1 {
			return fmt.Errorf("replicas %d, want spec.replicas 1", *d.Spec.Replicas)
		}
		return nil
	})
}
