package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

func TestFindMirrorLoop(t *testing.T) {
	dc1, dc2, dc3 := []string{"kafka.dc1:9092"}, []string{"kafka.dc2:9092"}, []string{"kafka.dc3:9092"}
	mirror := func(name string, from, to []string, include string, mutate ...func(*v1alpha1.KafkaMirror)) v1alpha1.KafkaMirror {
		m := v1alpha1.KafkaMirror{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1alpha1.KafkaMirrorSpec{
				Source: v1alpha1.ClusterSpec{BootstrapServers: from},
				Target: v1alpha1.ClusterSpec{BootstrapServers: to},
				Topics: v1alpha1.TopicsSpec{Include: []string{include}},
			},
		}
		for _, f := range mutate {
			f(&m)
		}
		return m
	}
	provenance := func(m *v1alpha1.KafkaMirror) { m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true} }
	prefix := func(p string) func(*v1alpha1.KafkaMirror) {
		return func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Prefix: p} }
	}
	seen := func(topics ...string) func(*v1alpha1.KafkaMirror) {
		return func(m *v1alpha1.KafkaMirror) {
			m.Status.Topics = &v1alpha1.TopicsStatus{}
			for _, tp := range topics {
				m.Status.Topics.Items = append(m.Status.Topics.Items, v1alpha1.TopicStatus{Source: tp, Target: tp})
			}
		}
	}
	tests := map[string]struct {
		m      v1alpha1.KafkaMirror
		others []v1alpha1.KafkaMirror
		peer   string // "" for no loop
		topic  string
	}{
		"reverse mirror, same literal name": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders")},
			peer:   "ns/ba", topic: "orders",
		},
		"reverse mirror, topic seen in status": {
			m:      mirror("ab", dc1, dc2, `orders\..*`, seen("orders.eu")),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`)},
			peer:   "ns/ba", topic: "orders.eu",
		},
		"topic seen in the peer's status": {
			m:      mirror("ab", dc1, dc2, `orders\..*`),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`, seen("orders.us"))},
			peer:   "ns/ba", topic: "orders.us",
		},
		"provenance on one side only": {
			m:      mirror("ab", dc1, dc2, "orders", provenance),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders")},
			peer:   "ns/ba", topic: "orders",
		},
		"provenance on both": {
			m:      mirror("ab", dc1, dc2, "orders", provenance),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", provenance)},
		},
		"prefixes keep the directions apart": {
			m:      mirror("ab", dc1, dc2, `orders\..*`, prefix("dc1."), seen("orders.eu")),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`, prefix("dc2."), seen("orders.eu"))},
		},
		"disjoint topics": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "payments")},
		},
		"same direction is no loop": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ab2", dc1, dc2, "orders")},
		},
		"a third cluster": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("cb", dc3, dc1, "orders")},
		},
		"itself": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ab", dc1, dc2, "orders")},
		},
		"regexes never seen match": {
			m:      mirror("ab", dc1, dc2, `orders\..*`),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.m
			cfg := RenderConfig(&m)
			got := findMirrorLoop(&m, cfg, tc.others)
			if tc.peer == "" {
				if got != nil {
					t.Fatalf("found a loop: %v", got)
				}
				return
			}
			if got == nil || got.peer != tc.peer || got.topic != tc.topic {
				t.Fatalf("findMirrorLoop = %+v, want peer %s and topic %s", got, tc.peer, tc.topic)
			}
			if !strings.HasPrefix(got.Error(), "spec.provenance.enabled: Required value: KafkaMirror "+tc.peer) || !isMirrorLoop(got) {
				t.Fatalf("error %q does not name the field and the peer", got.Error())
			}
		})
	}
}

// mirrorLoopRuns numbers the runs of TestMirrorLoopStalls in one process.
var mirrorLoopRuns atomic.Int32

// TestMirrorLoopStalls: a KafkaMirror that mirrors another's target back into its source
// under the same names stalls both with MirrorLoop (no Deployment for the new one), and
// turning provenance on in both clears it without any other change.
func TestMirrorLoopStalls(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-invalid"
	const topic = "mirrorloop-only"
	// Names of their own per run, so that the test can run again against the same API
	// server (envtest has no garbage collector to remove the Deployments).
	run := mirrorLoopRuns.Add(1)
	abName, baName := fmt.Sprintf("loop-ab-%d", run), fmt.Sprintf("loop-ba-%d", run)
	ab := testMirror(ns, abName, topic)
	ba := testMirror(ns, baName, topic, func(m *v1alpha1.KafkaMirror) { m.Spec.Source, m.Spec.Target = m.Spec.Target, m.Spec.Source })
	for _, m := range []*v1alpha1.KafkaMirror{ab, ba} {
		create(t, m)
		t.Cleanup(func() { _ = env.client.Delete(context.Background(), m) })
	}
	for _, name := range []string{abName, baName} {
		m, c := waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonMirrorLoop)
		if !strings.Contains(c.Message, "spec.provenance.enabled") || !strings.Contains(c.Message, topic) {
			t.Fatalf("%s: Stalled message %q does not name spec.provenance.enabled and the topic", name, c.Message)
		}
		expect(t, name+" observedGeneration", m.Status.ObservedGeneration, m.Generation)
		waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonMirrorLoop)
	}
	if err := get(&appsv1.Deployment{}, ns, baName+"-mirror"); err == nil {
		t.Fatal("a Deployment exists for the mirror that closes the loop")
	}
	for _, name := range []string{abName, baName} {
		testutil.Eventually(t, 90*time.Second, func() error {
			m := &v1alpha1.KafkaMirror{}
			if err := get(m, ns, name); err != nil {
				return err
			}
			m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true}
			return env.client.Update(context.Background(), m)
		})
	}
	for _, name := range []string{abName, baName} {
		waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
		testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, ns, name+"-mirror") })
	}
}
