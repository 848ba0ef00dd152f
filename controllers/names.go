package controllers

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// Paths inside the mirror pods. The rendered mirror.yaml names secret files under
// secretsDir, and the operator's own topic sync reads the same paths from Secret data,
// so both reach the clusters with the same settings.
const (
	configDir  = "/etc/kafka-mirror"
	configKey  = "mirror.yaml"
	configPath = configDir + "/" + configKey
	secretsDir = configDir + "/secrets"
)

// Names and ports shared by the children of a KafkaMirror.
const (
	// FieldOwner is the server-side apply field manager of everything the operator writes.
	FieldOwner = "kafka-mirror-operator"
	// ConfigHashAnnotation on the pod template holds a hash of mirror.yaml and of the
	// referenced Secret keys, so that a change to either rolls the pods.
	ConfigHashAnnotation = "kafkamirror.io/config-hash"

	metricsPortName = "metrics"
	metricsPort     = 8080
	containerName   = "mirror"
	runAsUser       = 65532
)

// Label keys. The selector uses only name and instance, which never change.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPartOf    = "app.kubernetes.io/part-of"
)

func deploymentName(m *v1alpha1.KafkaMirror) string { return m.Name + "-mirror" }
func configMapName(m *v1alpha1.KafkaMirror) string  { return m.Name + "-mirror-config" }
func serviceName(m *v1alpha1.KafkaMirror) string    { return m.Name + "-mirror-metrics" }
func pdbName(m *v1alpha1.KafkaMirror) string        { return m.Name + "-mirror" }

// selectorLabels select the mirror pods of m.
func selectorLabels(m *v1alpha1.KafkaMirror) map[string]string {
	return map[string]string{labelName: "kafka-mirror", labelInstance: m.Name}
}

// childLabels are put on every child object and on the pods.
func childLabels(m *v1alpha1.KafkaMirror) map[string]string {
	l := selectorLabels(m)
	l[labelComponent] = "mirror"
	l[labelManagedBy] = FieldOwner
	l[labelPartOf] = "kafka-mirror"
	return l
}

// podSelector is status.selector, the string form the scale subresource reports.
func podSelector(m *v1alpha1.KafkaMirror) string {
	return labels.SelectorFromSet(selectorLabels(m)).String()
}
