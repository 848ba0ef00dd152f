package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"maps"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// mirrorConfigMap holds the rendered mirror.yaml that the mirror pods run from.
func mirrorConfigMap(m *v1alpha1.KafkaMirror, mirrorYAML []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(m, configMapName(m)),
		Data:       map[string]string{configKey: string(mirrorYAML)},
	}
}

// childMeta is the metadata of every child: labels and the controller owner reference,
// so that deleting the KafkaMirror deletes its children (and nothing in Kafka).
func childMeta(m *v1alpha1.KafkaMirror, name string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Name:            name,
		Namespace:       m.Namespace,
		Labels:          childLabels(m),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(m, v1alpha1.GroupVersion.WithKind("KafkaMirror"))},
	}
	if cm := m.Spec.ChildMetadata; cm != nil {
		labels := maps.Clone(cm.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, meta.Labels) // the operator's labels win
		meta.Labels = labels
		if len(cm.Annotations) > 0 {
			meta.Annotations = maps.Clone(cm.Annotations)
		}
	}
	return meta
}
