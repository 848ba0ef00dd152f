package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// autoscalerConflictError is a HorizontalPodAutoscaler (KEDA's keda-hpa-<name> for a
// ScaledObject is one) that would fight the operator over a KafkaMirror's replica
// count: one aimed at the mirror's Deployment, whose replicas the operator writes at
// every reconcile, or one aimed at a KafkaMirror that has spec.autoscaling.
type autoscalerConflictError struct {
	// hpa is the HorizontalPodAutoscaler's name; onDeployment is true when it scales the
	// mirror Deployment (deployment), false when it scales the KafkaMirror.
	hpa, deployment string
	onDeployment    bool
	// autoscaling is true when the KafkaMirror has spec.autoscaling.
	autoscaling bool
}

func (e *autoscalerConflictError) Error() string {
	switch {
	case e.onDeployment && e.autoscaling:
		return fmt.Sprintf("spec.autoscaling: the HorizontalPodAutoscaler %s scales the mirror Deployment %s, whose replicas the operator writes from spec.autoscaling; "+
			"remove the HorizontalPodAutoscaler (for KEDA, its ScaledObject) or spec.autoscaling; the operator leaves the Deployment alone meanwhile", e.hpa, e.deployment)
	case e.onDeployment:
		return fmt.Sprintf("spec.replicas: the HorizontalPodAutoscaler %s scales the mirror Deployment %s, whose replicas the operator writes from spec.replicas, so each would undo the other; "+
			"point its scaleTargetRef at the KafkaMirror instead (apiVersion %s, kind KafkaMirror: it has a scale subresource), or remove it and use spec.autoscaling; "+
			"the operator leaves the Deployment alone meanwhile", e.hpa, e.deployment, v1alpha1.GroupVersion.String())
	}
	return fmt.Sprintf("spec.autoscaling: the HorizontalPodAutoscaler %s scales this KafkaMirror too, and two autoscalers would fight over the replica count; "+
		"remove spec.autoscaling or the HorizontalPodAutoscaler (for KEDA, its ScaledObject)", e.hpa)
}

// isAutoscalerConflict reports whether err is an *autoscalerConflictError.
func isAutoscalerConflict(err error) bool {
	var c *autoscalerConflictError
	return errors.As(err, &c)
}

// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch

// checkAutoscalerConflict returns an *autoscalerConflictError when a
// HorizontalPodAutoscaler in m's namespace scales m's Deployment (in every mode: the
// operator writes its replicas), or scales m through its scale subresource while m has
// spec.autoscaling. An HPA on the KafkaMirror without spec.autoscaling is the supported
// way (it sets spec.replicas).
func (r *KafkaMirrorReconciler) checkAutoscalerConflict(ctx context.Context, m *v1alpha1.KafkaMirror, _ *config.Config) (error, error) {
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.List(ctx, &hpas, client.InNamespace(m.Namespace)); err != nil {
		return nil, fmt.Errorf("while listing HorizontalPodAutoscalers to look for one on the mirror Deployment: %w", err)
	}
	for _, h := range hpas.Items {
		switch scalesMirror(h.Spec.ScaleTargetRef, m) {
		case scalesDeployment:
			return &autoscalerConflictError{hpa: h.Name, deployment: deploymentName(m), onDeployment: true, autoscaling: m.Spec.Autoscaling != nil}, nil
		case scalesKafkaMirror:
			if m.Spec.Autoscaling != nil {
				return &autoscalerConflictError{hpa: h.Name, autoscaling: true}, nil
			}
		}
	}
	return nil, nil
}

// scaleTarget is what a HorizontalPodAutoscaler scales, as far as one KafkaMirror is
// concerned.
type scaleTarget int

const (
	scalesOther scaleTarget = iota
	scalesKafkaMirror
	scalesDeployment
)

// scalesMirror tells whether ref points at m, at m's Deployment, or elsewhere.
func scalesMirror(ref autoscalingv2.CrossVersionObjectReference, m *v1alpha1.KafkaMirror) scaleTarget {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return scalesOther
	}
	switch {
	case gv.Group == v1alpha1.GroupVersion.Group && ref.Kind == "KafkaMirror" && ref.Name == m.Name:
		return scalesKafkaMirror
	case gv.Group == "apps" && strings.EqualFold(ref.Kind, "Deployment") && ref.Name == deploymentName(m):
		return scalesDeployment
	}
	return scalesOther
}
