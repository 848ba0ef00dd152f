package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestSyncPartitionsTurnedOn: turning spec.syncPartitions from false to true starts a
// topic sync at once (the sync timer is 10 minutes here), which creates the missing
// target topic; and no status ever reports the result of the syncPartitions-false sync
// as that of the new generation.
func TestSyncPartitionsTurnedOn(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name, topic = "t-syncspec", "turned-on", "syncspec.on"
	src := kafkaAdmin(t, env.source)
	createTopic(t, src, topic, 3)
	create(t, testMirror(ns, name, `syncspec\.on`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.SyncPartitions = ptr.To(false)
		m.Spec.TopicSyncInterval = &metav1.Duration{Duration: 10 * time.Minute}
	}))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonTopicSyncDisabled)

	gen := updateSpec(t, ns, name, func(m *v1alpha1.KafkaMirror) { m.Spec.SyncPartitions = ptr.To(true) })
	tgt := kafkaAdmin(t, env.target)
	testutil.Eventually(t, 60*time.Second, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionTopicsSynced)
		if m.Status.ObservedGeneration >= gen && c != nil && c.Reason == v1alpha1.ReasonTopicSyncDisabled {
			// Not retried: the status said something false.
			t.Fatalf("observedGeneration %d (syncPartitions true) with TopicsSynced %s: %s", m.Status.ObservedGeneration, c.Reason, c.Message)
		}
		if c == nil || c.ObservedGeneration != gen || c.Status != metav1.ConditionTrue || m.Status.ObservedGeneration != gen {
			return fmt.Errorf("TopicsSynced %+v at observedGeneration %d, want True at %d", c, m.Status.ObservedGeneration, gen)
		}
		return nil
	})
	parts, err := partitions(tgt)
	if err != nil {
		t.Fatal(err)
	}
	if parts[topic] != 3 {
		t.Fatalf("target %s has %d partitions, want 3", topic, parts[topic])
	}
}
