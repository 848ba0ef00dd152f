package controllers

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestSyncInputCoversTheSpec: every spec field that changes what a topic sync does
// changes its input, so that changing it starts a new sync (and a result computed
// before is never reported for it); fields the sync does not read leave it alone, so
// that they start none.
func TestSyncInputCoversTheSpec(t *testing.T) {
	base := func() *v1alpha1.KafkaMirror { return newMirror() }
	inputOf := func(t *testing.T, m *v1alpha1.KafkaMirror) string {
		t.Helper()
		cfg, err := validate(m)
		if err != nil {
			t.Fatal(err)
		}
		in, err := syncInput(syncRequestFor(m, cfg), nil)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	changes := map[string]func(*v1alpha1.KafkaMirror){
		"syncPartitions":           func(m *v1alpha1.KafkaMirror) { m.Spec.SyncPartitions = ptr.To(false) },
		"syncTopicConfigs":         func(m *v1alpha1.KafkaMirror) { m.Spec.SyncTopicConfigs = ptr.To(false) },
		"topics.include":           func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Include = append(m.Spec.Topics.Include, "more") },
		"topics.exclude":           func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Exclude = []string{"orders"} },
		"topics.rename":            func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Prefix: "dc1."} },
		"topics.replicationFactor": func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.ReplicationFactor = ptr.To[int32](3) },
		"topics.configExclude":     func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.ConfigExclude = []string{"retention.ms"} },
		"source.bootstrapServers":  func(m *v1alpha1.KafkaMirror) { m.Spec.Source.BootstrapServers = []string{"other:9092"} },
		"target.bootstrapServers":  func(m *v1alpha1.KafkaMirror) { m.Spec.Target.BootstrapServers = []string{"other:9092"} },
		"target.tls":               func(m *v1alpha1.KafkaMirror) { m.Spec.Target.TLS = &v1alpha1.TLSSpec{InsecureSkipVerify: true} },
		"consumerGroup (lag)":      func(m *v1alpha1.KafkaMirror) { m.Spec.ConsumerGroup = "another-group" },
		"groups":                   func(m *v1alpha1.KafkaMirror) { m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"app"}} },
	}
	before := inputOf(t, base())
	for field, change := range changes {
		t.Run(field, func(t *testing.T) {
			m := base()
			change(m)
			if inputOf(t, m) == before {
				t.Fatalf("changing spec.%s leaves the sync input as it was", field)
			}
		})
	}
	for field, change := range map[string]func(*v1alpha1.KafkaMirror){
		"replicas": func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = ptr.To[int32](3) },
		"paused":   func(m *v1alpha1.KafkaMirror) { m.Spec.Paused = true },
	} {
		t.Run("not "+field, func(t *testing.T) {
			m := base()
			change(m)
			if inputOf(t, m) != before {
				t.Fatalf("changing spec.%s changes the sync input", field)
			}
		})
	}
}
