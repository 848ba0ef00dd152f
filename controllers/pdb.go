package controllers

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// podDisruptionBudget lets node drains evict one mirror pod at a time, so that a drain
// never stops the whole mirror. It exists only while more than one pod runs: with one
// pod a budget of one unavailable pod would allow everything anyway, and a stricter
// one would block drains forever.
func podDisruptionBudget(m *v1alpha1.KafkaMirror) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: childMeta(m, pdbName(m)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(m)},
		},
	}
}

// wantsPDB reports whether m should have a PodDisruptionBudget.
func wantsPDB(m *v1alpha1.KafkaMirror) bool { return desiredReplicas(m) > 1 }
