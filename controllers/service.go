package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// metricsService exposes the mirror pods' /metrics for Prometheus (a ServiceMonitor or
// a scrape config selects it by its labels and the "metrics" port name).
func metricsService(m *v1alpha1.KafkaMirror) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(m, serviceName(m)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(m),
			Ports: []corev1.ServicePort{{
				Name:       metricsPortName,
				Port:       metricsPort,
				TargetPort: intstr.FromString(metricsPortName),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}
