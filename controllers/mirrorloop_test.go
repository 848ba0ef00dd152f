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
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

func TestFindMirrorLoop(t *testing.T) {
	dc1, dc2, dc3 := []string{"kafka.dc1:9092"}, []string{"kafka.dc2:9092"}, []string{"kafka.dc3:9092"}
	// The mirror checked, "ab", is created last unless a case says otherwise: the
	// others were there first.
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mirror := func(name string, from, to []string, include string, mutate ...func(*v1alpha1.KafkaMirror)) v1alpha1.KafkaMirror {
		ts := created
		if name == "ab" {
			ts = metav1.NewTime(created.Add(time.Minute))
		}
		m := v1alpha1.KafkaMirror{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: ts},
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
	namespace := func(ns string) func(*v1alpha1.KafkaMirror) {
		return func(m *v1alpha1.KafkaMirror) { m.Namespace = ns }
	}
	later := func(m *v1alpha1.KafkaMirror) { m.CreationTimestamp = metav1.NewTime(created.Add(time.Hour)) }
	stalled := func(reason string, gen int64) func(*v1alpha1.KafkaMirror) {
		return func(m *v1alpha1.KafkaMirror) {
			m.Generation = gen
			status := metav1.ConditionTrue
			if reason == v1alpha1.ReasonReconciled {
				status = metav1.ConditionFalse
			}
			m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionStalled, Status: status, Reason: reason, ObservedGeneration: 1}}
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
			peer:   "KafkaMirror ba", topic: "orders",
		},
		"the failback of a failed-over mirror": {
			m: mirror("ab", dc1, dc2, "orders", provenance, func(m *v1alpha1.KafkaMirror) {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "ba"}
			}),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", func(m *v1alpha1.KafkaMirror) {
				m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "planned"}
			})},
		},
		"a reverse mirror of a failed-over mirror": {
			m: mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", func(m *v1alpha1.KafkaMirror) {
				m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "planned"}
				m.Status.Failover = &v1alpha1.FailoverStatus{Phase: v1alpha1.FailoverCompleted}
			})},
		},
		"a reverse mirror of a mirror still failing over": {
			m: mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", func(m *v1alpha1.KafkaMirror) {
				m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "planned"}
				m.Status.Failover = &v1alpha1.FailoverStatus{Phase: v1alpha1.FailoverRunning}
			})},
			peer: "KafkaMirror ba", topic: "orders",
		},
		"a failback whose failover is not declared yet": {
			m: mirror("ab", dc1, dc2, "orders", provenance, func(m *v1alpha1.KafkaMirror) {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "ba"}
			}),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders")},
		},
		"a mirror failing over, against a failback of it that was there first": {
			m: mirror("ab", dc1, dc2, "orders", func(m *v1alpha1.KafkaMirror) {
				m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "immediate"}
			}),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", provenance, func(m *v1alpha1.KafkaMirror) {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "ab"}
			})},
		},
		"a failback of another mirror still loops": {
			m: mirror("ab", dc1, dc2, "orders", provenance, func(m *v1alpha1.KafkaMirror) {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "gone"}
			}),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders")},
			peer:   "KafkaMirror ba", topic: "orders",
		},
		"a peer in another namespace is not named": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", namespace("other"))},
			peer:   "another KafkaMirror in the cluster", topic: "orders",
		},
		"the other mirror came later": {
			m:      mirror("ab", dc1, dc2, "orders"),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", later)},
		},
		"the other mirror came later but runs, and this one's spec changed": {
			m:      mirror("ab", dc1, dc2, "orders", stalled(v1alpha1.ReasonReconciled, 2)),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", later, stalled(v1alpha1.ReasonReconciled, 1))},
			peer:   "KafkaMirror ba", topic: "orders",
		},
		"the other mirror was first but stands refused": {
			m:      mirror("ab", dc1, dc2, "orders", stalled(v1alpha1.ReasonReconciled, 1)),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", stalled(v1alpha1.ReasonMirrorLoop, 1))},
		},
		"this one stands refused": {
			m:      mirror("ab", dc1, dc2, "orders", stalled(v1alpha1.ReasonMirrorLoop, 1)),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders", later)},
			peer:   "KafkaMirror ba", topic: "orders",
		},
		"reverse mirror, topic seen in status": {
			m:      mirror("ab", dc1, dc2, `orders\..*`, seen("orders.eu")),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`)},
			peer:   "KafkaMirror ba", topic: "orders.eu",
		},
		"topic seen in the peer's status": {
			m:      mirror("ab", dc1, dc2, `orders\..*`),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`, seen("orders.us"))},
			peer:   "KafkaMirror ba", topic: "orders.us",
		},
		"provenance on one side only": {
			m:      mirror("ab", dc1, dc2, "orders", provenance),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, "orders")},
			peer:   "KafkaMirror ba", topic: "orders",
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
		"regexes that overlap, no topic seen yet": {
			m:      mirror("ab", dc1, dc2, `orders\..*`),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `orders\..*`)},
			peer:   "KafkaMirror ba", topic: "orders.",
		},
		"regexes that do not overlap": {
			m:      mirror("ab", dc1, dc2, `orders\..*`),
			others: []v1alpha1.KafkaMirror{mirror("ba", dc2, dc1, `payments\..*`)},
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
			if !strings.HasPrefix(got.Error(), "spec.provenance.enabled: Required value: "+tc.peer+" mirrors") || !isMirrorLoop(got) {
				t.Fatalf("error %q does not name the field and the peer", got.Error())
			}
		})
	}
}

// mirrorLoopRuns numbers the runs of TestMirrorLoopStalls in one process.
var mirrorLoopRuns atomic.Int32

// TestMirrorLoopStalls: a KafkaMirror that mirrors another's target back into its
// source under the same names is refused with MirrorLoop (no Deployment), naming the
// other one (same namespace) and the topic, while the one that was there first goes on;
// turning provenance on in both clears it without any other change. Tenants in other
// namespaces: TestMirrorLoopRefusesTheNewcomer.
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
	create(t, ab)
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ab) })
	waitCondition(t, ns, abName, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	create(t, ba)
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ba) })

	m, c := waitCondition(t, ns, baName, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonMirrorLoop)
	if !strings.Contains(c.Message, "spec.provenance.enabled") || !strings.Contains(c.Message, topic) || !strings.Contains(c.Message, "KafkaMirror "+abName+" mirrors") {
		t.Fatalf("Stalled message %q does not name spec.provenance.enabled, the topic and the other mirror", c.Message)
	}
	expect(t, baName+" observedGeneration", m.Status.ObservedGeneration, m.Generation)
	waitCondition(t, ns, baName, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonMirrorLoop)
	if err := get(&appsv1.Deployment{}, ns, baName+"-mirror"); err == nil {
		t.Fatal("a Deployment exists for the mirror that closes the loop")
	}
	if c := reconciledAgain(t, ns, abName); c.Status != metav1.ConditionFalse {
		t.Fatalf("the mirror that was there first is Stalled: %s", c.Message)
	}
	for _, name := range []string{abName, baName} {
		updateMirror(t, ns, name, func(m *v1alpha1.KafkaMirror) { m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true} })
	}
	for _, name := range []string{abName, baName} {
		waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
		testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, ns, name+"-mirror") })
	}
}
