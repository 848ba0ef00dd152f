package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestLagReportedWithoutPods: the operator reads the mirror's lag from the source itself,
// so status and kafka_mirror_operator_topic_lag report it while no mirror pod runs (envtest
// runs none), follow new records on the sync timer, and drop the series with the mirror.
func TestLagReportedWithoutPods(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name, topic = "t-lag", "behind", "lagm.a"
	createTopic(t, kafkaAdmin(t, env.source), topic, 2)
	produce := func(n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.source.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(25)
	create(t, testMirror(ns, name, `lagm\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.TopicSyncInterval = &metav1.Duration{Duration: time.Second}
	}))
	waitLag := func(want int64) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, func() error {
			m := &v1alpha1.KafkaMirror{}
			if err := get(m, ns, name); err != nil {
				return err
			}
			if m.Status.Topics == nil || len(m.Status.Topics.Items) != 1 || m.Status.Topics.Items[0].Lag == nil {
				return fmt.Errorf("no lag in status yet: %+v", m.Status.Topics)
			}
			if got := *m.Status.Topics.Items[0].Lag; got != want {
				return fmt.Errorf("status lag %d, want %d", got, want)
			}
			if got := promtestutil.ToFloat64(topicLag.WithLabelValues(ns, name, topic)); got != float64(want) {
				return fmt.Errorf("kafka_mirror_operator_topic_lag %v, want %d", got, want)
			}
			for state, n := range map[string]float64{"selected": 1, "inSync": 1, "mismatched": 0, "failed": 0} {
				if got := promtestutil.ToFloat64(topicStateCounts.WithLabelValues(ns, name, state)); got != n {
					return fmt.Errorf("kafka_mirror_operator_topics{state=%q} %v, want %v", state, got, n)
				}
			}
			return nil
		})
	}
	waitLag(25)
	produce(5)
	waitLag(30)

	m := &v1alpha1.KafkaMirror{}
	if err := get(m, ns, name); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 90*time.Second, func() error {
		if n := seriesOf(ns, name); n != 0 {
			return fmt.Errorf("%d lag series left for the deleted mirror", n)
		}
		return nil
	})
}

// seriesOf counts the lag and topic-count series of one KafkaMirror.
func seriesOf(ns, name string) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { topicLag.Collect(ch); topicStateCounts.Collect(ch); close(ch) }()
	n := 0
	for m := range ch {
		d := &dto.Metric{}
		if err := m.Write(d); err == nil {
			labels := map[string]string{}
			for _, l := range d.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["mirror_namespace"] == ns && labels["mirror"] == name {
				n++
			}
		}
	}
	return n
}
