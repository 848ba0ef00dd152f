package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestAutoscalingInTheCluster: with spec.autoscaling the operator writes the
// Deployment's replicas from its decision (spec.replicas, and so `kubectl scale`, only
// seeds it, within [minReplicas, maxReplicas]); an idle mirror goes to minReplicas with a
// ScaledDown event; a HorizontalPodAutoscaler on the same KafkaMirror stalls it until it
// is removed; paused wins. The scale up on a real backlog, with engines, is
// test/e2e's TestAutoscaleOnLag.
func TestAutoscalingInTheCluster(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, name, deployment = "t-autoscale", "auto", "auto-mirror"
	m := testMirror(ns, name, `autoscale\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Replicas = ptr.To[int32](5)
		m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 3,
			ScaleDownStabilization: &metav1.Duration{Duration: 4 * testSyncInterval}}
	})
	create(t, m)
	replicas := func(want int32) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			d := &appsv1.Deployment{}
			if err := get(d, ns, deployment); err != nil {
				return err
			}
			if *d.Spec.Replicas != want {
				return fmt.Errorf("deployment replicas %d, want %d", *d.Spec.Replicas, want)
			}
			return nil
		})
	}
	// spec.replicas 5 seeds the count, clamped to maxReplicas.
	replicas(3)
	markDeploymentReady(t, ns, deployment)

	// No topic, so no inflow and no lag: down to minReplicas once the window passed.
	replicas(2)
	// The Deployment is written before the status, in the same reconcile.
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := get(m, ns, name); err != nil {
			return err
		}
		as := m.Status.Autoscaling
		if as == nil || as.DesiredReplicas != 2 || as.LastScaleTime == nil || as.Lag == nil || *as.Lag != 0 {
			return fmt.Errorf("status.autoscaling = %+v, want desiredReplicas 2 after a scale down with lag 0", as)
		}
		return nil
	})
	waitEvent(t, ns, name, v1alpha1.ReasonScaledDown, "scaled down from 3 to 2 replicas")

	// kubectl scale changes spec.replicas, which autoscaling ignores.
	// Read and write again on a conflict, as kubectl does: the operator writes status.
	testutil.Eventually(t, 90*time.Second, func() error {
		scale := &autoscalingv1.Scale{}
		if err := env.client.SubResource("scale").Get(ctx, m, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = 3
		return env.client.SubResource("scale").Update(ctx, m, client.WithSubResourceBody(scale))
	})
	time.Sleep(3 * testSyncInterval) // a few decisions
	replicas(2)

	// An HPA on the same KafkaMirror (KEDA makes one too) would fight it: Stalled.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keda-hpa-auto"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KafkaMirror", Name: name},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 4,
		},
	}
	create(t, hpa)
	_, stalled := waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonAutoscalerConflict)
	if !strings.Contains(stalled.Message, "HorizontalPodAutoscaler keda-hpa-auto scales this KafkaMirror") {
		t.Errorf("the Stalled message does not name the HPA: %s", stalled.Message)
	}
	if err := env.client.Delete(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)

	// Paused wins: 0 replicas, and the decision is kept for the resume.
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(m, ns, name); err != nil {
			return err
		}
		m.Spec.Paused = true
		return env.client.Update(ctx, m)
	})
	replicas(0)
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(m, ns, name); err != nil {
			return err
		}
		if as := m.Status.Autoscaling; as == nil || as.Reason != v1alpha1.ReasonPaused || as.DesiredReplicas != 2 {
			return fmt.Errorf("status.autoscaling = %+v, want Paused with desiredReplicas 2", as)
		}
		return nil
	})
}

// TestScalesMirror: an HPA is aimed at the KafkaMirror, at its Deployment, or at
// something else.
func TestScalesMirror(t *testing.T) {
	tests := map[string]struct {
		ref  autoscalingv2.CrossVersionObjectReference
		want scaleTarget
	}{
		"the KafkaMirror":           {autoscalingv2.CrossVersionObjectReference{APIVersion: "kafkamirror.io/v1alpha1", Kind: "KafkaMirror", Name: "orders"}, scalesKafkaMirror},
		"its Deployment":            {autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "orders-mirror"}, scalesDeployment},
		"another KafkaMirror":       {autoscalingv2.CrossVersionObjectReference{APIVersion: "kafkamirror.io/v1alpha1", Kind: "KafkaMirror", Name: "payments"}, scalesOther},
		"a Deployment of that name": {autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "orders"}, scalesOther},
		"a StatefulSet":             {autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "orders-mirror"}, scalesOther},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMirror()
			m.Name = "orders"
			expect(t, "scale target", scalesMirror(tc.ref, m), tc.want)
		})
	}
}

// waitEvent waits for an event of reason about the KafkaMirror whose note holds note.
func waitEvent(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		var events eventsv1.EventList
		if err := env.client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, note) {
				return nil
			}
		}
		return fmt.Errorf("no %s event saying %q among %d events", reason, note, len(events.Items))
	})
}
