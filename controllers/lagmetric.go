package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// topicLag is the operator's own view of each mirror's lag per source topic, read from
// the source cluster at every topic sync. Unlike the engine's kafka_mirror_lag it keeps
// being reported while every mirror pod is down, so lag alerts do not go silent when
// they matter most.
var topicLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kafka_mirror_operator_topic_lag",
	Help: "Source records not yet committed by a KafkaMirror's consumer group, per source topic, as the operator read them at its last topic sync (reported while the mirror pods are down too).",
	// Not "namespace": Prometheus sets that label to the operator pod's namespace.
}, []string{"mirror_namespace", "mirror", "topic"})

// topicStateCounts is status.topics as a metric: how many selected topics are in sync,
// mismatched (a target with more partitions, or drift left alone with syncPartitions
// false) or failed, so drift can be alerted on.
var topicStateCounts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "kafka_mirror_operator_topics",
	Help: "Selected source topics of a KafkaMirror by the state of their target after the last topic sync (state selected, inSync, mismatched, failed).",
}, []string{"mirror_namespace", "mirror", "state"})

func init() { metrics.Registry.MustRegister(topicLag, topicStateCounts) }

// reportedLag remembers, per KafkaMirror, the topics whose lag series were set, so
// that a report changes only its own series: prometheus' DeletePartialMatch scans every
// series of the vector, which at 1,000 KafkaMirrors made each reconcile's report cost
// as much as the rest of an idle reconcile.
var reportedLag = struct {
	sync.Mutex
	topics map[types.NamespacedName]map[string]bool
}{topics: map[types.NamespacedName]map[string]bool{}}

// topicStates are the state label values of topicStateCounts.
var topicStates = []string{"selected", "inSync", "mismatched", "failed"}

// reportLag replaces the lag and topic-count series of m with what st says (a topic
// whose lag could not be read has no lag series; counts are 0 before the first sync).
func reportLag(m *v1alpha1.KafkaMirror, st *v1alpha1.KafkaMirrorStatus) {
	var ts v1alpha1.TopicsStatus
	if st.Topics != nil {
		ts = *st.Topics
	}
	for i, n := range []int32{ts.Selected, ts.InSync, ts.Mismatched, ts.Failed} {
		topicStateCounts.WithLabelValues(m.Namespace, m.Name, topicStates[i]).Set(float64(n))
	}
	now := map[string]bool{}
	for _, t := range ts.Items {
		if t.Lag != nil {
			topicLag.WithLabelValues(m.Namespace, m.Name, t.Source).Set(float64(*t.Lag))
			now[t.Source] = true
		}
	}
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	reportedLag.Lock()
	defer reportedLag.Unlock()
	for topic := range reportedLag.topics[key] {
		if !now[topic] {
			topicLag.DeleteLabelValues(m.Namespace, m.Name, topic)
		}
	}
	reportedLag.topics[key] = now
}

// forgetLag drops the lag and topic-count series of a KafkaMirror.
func forgetLag(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	reportedLag.Lock()
	defer reportedLag.Unlock()
	for topic := range reportedLag.topics[key] {
		topicLag.DeleteLabelValues(namespace, name, topic)
	}
	delete(reportedLag.topics, key)
	for _, state := range topicStates {
		topicStateCounts.DeleteLabelValues(namespace, name, state)
	}
}
