package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// recordRecreatedTopics emits a Warning event for each selected source topic whose ID
// differs from the one the last status showed: it was deleted and created again.
func recordRecreatedTopics(rec events.EventRecorder, m *v1alpha1.KafkaMirror, next *v1alpha1.KafkaMirrorStatus) {
	if m.Status.Topics == nil || next.Topics == nil {
		return
	}
	before := make(map[string]string, len(m.Status.Topics.Items))
	for _, t := range m.Status.Topics.Items {
		before[t.Source] = t.SourceTopicID
	}
	for _, t := range next.Topics.Items {
		if old := before[t.Source]; old != "" && t.SourceTopicID != "" && old != t.SourceTopicID {
			rec.Eventf(m, nil, corev1.EventTypeWarning, v1alpha1.ReasonSourceTopicRecreated, "SyncTopics",
				"Source topic %s was deleted and created again (topic ID %s, was %s): the mirror starts the new topic at its beginning; records of the old topic not mirrored before its deletion are gone with it",
				t.Source, t.SourceTopicID, old)
		}
	}
}
