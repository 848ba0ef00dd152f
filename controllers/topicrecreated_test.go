package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestSourceTopicRecreatedEvent deletes a mirrored source topic and creates it again:
// status.topics shows the new topic ID, and a Warning event says that the topic was
// re-created and that the mirror starts it at its beginning (nothing in the status or
// the events told a user before: the engine's records were lost without a word).
func TestSourceTopicRecreatedEvent(t *testing.T) {
	requireEnv(t)
	const ns, name, topic = "t-topicid", "topicid", "topicid.a"
	admin := kafkaAdmin(t, env.source)
	createTopic(t, admin, topic, 2)
	create(t, testMirror(ns, name, `topicid\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)
	first := sourceTopicID(t, ns, name, topic, "")

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("while deleting topic %s: %v", topic, err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		return admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false)
	})
	second := sourceTopicID(t, ns, name, topic, first)

	testutil.Eventually(t, 45*time.Second, func() error {
		var events eventsv1.EventList
		if err := env.client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == v1alpha1.ReasonSourceTopicRecreated && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, topic) && strings.Contains(e.Note, first) && strings.Contains(e.Note, second) {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s event naming %s and both IDs among %d events", v1alpha1.ReasonSourceTopicRecreated, topic, len(events.Items))
	})
}

// sourceTopicID waits until status.topics shows topic with an ID other than not, and
// returns it.
func sourceTopicID(t *testing.T, ns, name, topic, not string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, 90*time.Second, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return err
		}
		if m.Status.Topics != nil {
			for _, it := range m.Status.Topics.Items {
				if it.Source == topic && it.SourceTopicID != "" && it.SourceTopicID != not {
					id = it.SourceTopicID
					return nil
				}
			}
		}
		return fmt.Errorf("status.topics has no %s with a topic ID other than %q: %+v", topic, not, m.Status.Topics)
	})
	return id
}
