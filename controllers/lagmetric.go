package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
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

func init() { metrics.Registry.MustRegister(topicLag) }

// reportLag replaces the lag series of m with the lags in st (a topic whose lag could
// not be read has no series).
func reportLag(m *v1alpha1.KafkaMirror, st *v1alpha1.KafkaMirrorStatus) {
	forgetLag(m.Namespace, m.Name)
	if st.Topics == nil {
		return
	}
	for _, t := range st.Topics.Items {
		if t.Lag != nil {
			topicLag.WithLabelValues(m.Namespace, m.Name, t.Source).Set(float64(*t.Lag))
		}
	}
}

// forgetLag drops the lag series of a KafkaMirror.
func forgetLag(namespace, name string) {
	topicLag.DeletePartialMatch(prometheus.Labels{"mirror_namespace": namespace, "mirror": name})
}
