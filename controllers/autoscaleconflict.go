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

// autoscalerConflictError is a HorizontalPodAutoscaler (KEDA's keda-hpa-<name> is one)
// that scales a KafkaMirror with spec.autoscaling, or its Deployment: two autoscalers
// would fight over the replica count.
type autoscalerConflictError struct {
	// hpa is the HorizontalPodAutoscaler's name; target what it scales.
	hpa, target string
}

func (e *autoscalerConflictError) Error() string {
	return fmt.Sprintf("spec.autoscaling: the HorizontalPodAutoscaler %s scales %s too, and two autoscalers would fight over the replica count; "+
		"remove spec.autoscaling or the HorizontalPodAutoscaler (for KEDA, its ScaledObject)", e.hpa, e.target)
}

// isAutoscalerConflict reports whether err is an *autoscalerConflictError.
func isAutoscalerConflict(err error) bool {
	var c *autoscalerConflictError
	return errors.As(err, &c)
}

// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch

// checkAutoscalerConflict returns an *autoscalerConflictError when m has
// spec.autoscaling and a HorizontalPodAutoscaler in its namespace scales m (through the
// scale subresource) or m's Deployment. HorizontalPodAutoscalers are listed only for
// KafkaMirrors with spec.autoscaling.
func (r *KafkaMirrorReconciler) checkAutoscalerConflict(ctx context.Context, m *v1alpha1.KafkaMirror, _ *config.Config) (error, error) {
	if m.Spec.Autoscaling == nil {
		return nil, nil
	}
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.List(ctx, &hpas, client.InNamespace(m.Namespace)); err != nil {
		return nil, fmt.Errorf("while listing HorizontalPodAutoscalers to check spec.autoscaling: %w", err)
	}
	for _, h := range hpas.Items {
		if target, ok := scalesMirror(h.Spec.ScaleTargetRef, m); ok {
			return &autoscalerConflictError{hpa: h.Name, target: target}, nil
		}
	}
	return nil, nil
}

// scalesMirror tells whether ref points at m or at m's Deployment, and names it.
func scalesMirror(ref autoscalingv2.CrossVersionObjectReference, m *v1alpha1.KafkaMirror) (string, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", false
	}
	switch {
	case gv.Group == v1alpha1.GroupVersion.Group && ref.Kind == "KafkaMirror" && ref.Name == m.Name:
		return "this KafkaMirror", true
	case gv.Group == "apps" && strings.EqualFold(ref.Kind, "Deployment") && ref.Name == deploymentName(m):
		return "the mirror Deployment " + ref.Name, true
	}
	return "", false
}
