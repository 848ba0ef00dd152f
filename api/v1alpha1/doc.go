// Package v1alpha1 holds the kafkamirror.io/v1alpha1 API: the KafkaMirror resource, its
// condition types and reasons. A KafkaMirror declares what to mirror between two Kafka
// clusters; the operator renders it into the engine's config file (mirror/config), so
// every spec field that also exists in that file has the same name and path there.
//
// +kubebuilder:object:generate=true
// +groupName=kafkamirror.io
package v1alpha1
