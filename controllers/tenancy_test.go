package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// updateSpec changes a KafkaMirror's spec, reading again on a conflict (the
// operator writes its status meanwhile), and returns its new generation.
func updateSpec(t *testing.T, ns, name string, mutate func(*v1alpha1.KafkaMirror)) int64 {
	t.Helper()
	var gen int64
	testutil.Eventually(t, 90*time.Second, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return err
		}
		mutate(m)
		if err := env.client.Update(context.Background(), m); err != nil {
			return err
		}
		gen = m.Generation
		return nil
	})
	return gen
}

// reconciledAgain bumps the generation of a KafkaMirror with a change that matters to
// none of the checks (spec.streams), and waits until the operator has reconciled that
// generation: its Stalled condition is then what a reconcile after everything before
// it decided.
func reconciledAgain(t *testing.T, ns, name string) *metav1.Condition {
	t.Helper()
	gen := updateSpec(t, ns, name, func(m *v1alpha1.KafkaMirror) { m.Spec.Streams++ })
	var c *metav1.Condition
	testutil.Eventually(t, 90*time.Second, func() error {
		var err error
		var m *v1alpha1.KafkaMirror
		if m, c, err = mirrorCondition(ns, name, v1alpha1.ConditionStalled); err != nil {
			return err
		}
		if m.Generation != gen {
			return fmt.Errorf("generation %d, want %d", m.Generation, gen)
		}
		return nil
	})
	return c
}

// TestMirrorLoopRefusesTheNewcomer: tenant A's mirror runs; tenant B creates the
// reverse mirror of the same topics (regular expressions, no topic on either cluster
// yet) in its own namespace. B is refused (Stalled, MirrorLoop) without learning A's
// namespace or name, and A goes on, reconciled after B appeared; once B is deleted,
// nothing is left of it. The same-namespace case, where the message names the other
// mirror, is TestMirrorLoopStalls.
func TestMirrorLoopRefusesTheNewcomer(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const nsA, nsB, name = "t-tenant-a", "t-tenant-b", "orders-loop"
	a := testMirror(nsA, name, `tenantloop\..*`)
	create(t, a)
	waitCondition(t, nsA, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, nsA, name+"-mirror") })

	b := testMirror(nsB, name, `tenantloop\..*`, func(m *v1alpha1.KafkaMirror) { m.Spec.Source, m.Spec.Target = m.Spec.Target, m.Spec.Source })
	create(t, b)
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), b) })
	_, c := waitCondition(t, nsB, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonMirrorLoop)
	if strings.Contains(c.Message, nsA) || !strings.Contains(c.Message, "another KafkaMirror in the cluster") {
		t.Errorf("B's message names A's namespace, or does not say \"another KafkaMirror in the cluster\": %s", c.Message)
	}
	if !strings.Contains(c.Message, "spec.provenance.enabled") || !strings.Contains(c.Message, `"tenantloop.`) {
		t.Errorf("B's message does not name the field and a topic that would loop: %s", c.Message)
	}
	if err := get(&appsv1.Deployment{}, nsB, name+"-mirror"); err == nil {
		t.Error("the refused mirror has a Deployment")
	}

	// A, reconciled after B exists, is not stalled, and neither is B's refusal undone.
	if c := reconciledAgain(t, nsA, name); c.Status != metav1.ConditionFalse {
		t.Fatalf("the mirror that was there first is Stalled: %s: %s", c.Reason, c.Message)
	}
	if c := reconciledAgain(t, nsB, name); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonMirrorLoop {
		t.Fatalf("the newcomer is %s/%s after A was reconciled again, want Stalled MirrorLoop", c.Status, c.Reason)
	}
}

// TestConsumerGroupOwnedByOneMirror: a consumer group belongs to one KafkaMirror per
// source cluster and per target cluster (its progress group, offset-sync topic and
// transactional ids derive from it). Tenant B naming tenant A's default group in
// spec.consumerGroup, on the same source, is refused (Stalled, ConsumerGroupInUse,
// naming the field but not A); so is a mirror from another source with the same group
// into the same target. A goes on; once both are gone, B may run.
func TestConsumerGroupOwnedByOneMirror(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const nsA, nsB, name = "t-tenant-a", "t-tenant-b", "orders-group"
	a := testMirror(nsA, name, `tenantgroup\.a`)
	create(t, a)
	waitCondition(t, nsA, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	group := ConsumerGroup(a)

	b := testMirror(nsB, name, `tenantgroup\.b`, func(m *v1alpha1.KafkaMirror) { m.Spec.ConsumerGroup = group })
	create(t, b)
	_, c := waitCondition(t, nsB, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonConsumerGroupInUse)
	if !strings.HasPrefix(c.Message, "spec.consumerGroup: ") || !strings.Contains(c.Message, "another KafkaMirror in the cluster") ||
		strings.Contains(c.Message, "KafkaMirror "+nsA) || !strings.Contains(c.Message, "source cluster") {
		t.Errorf("B's message does not name the field and the source cluster, or names A: %s", c.Message)
	}
	waitCondition(t, nsB, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonConsumerGroupInUse)
	if err := get(&appsv1.Deployment{}, nsB, name+"-mirror"); err == nil {
		t.Error("the refused mirror has a Deployment")
	}

	// Another source, the same target: the progress group and the offset-sync topic on
	// the target would be shared.
	other := testMirror(nsB, name+"-other-source", `tenantgroup\.c`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.ConsumerGroup = group
		m.Spec.Source.BootstrapServers = []string{"127.0.0.1:1"}
	})
	create(t, other)
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), other) })
	_, c = waitCondition(t, nsB, other.Name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonConsumerGroupInUse)
	if !strings.Contains(c.Message, "target cluster") {
		t.Errorf("the message does not say the target cluster is shared: %s", c.Message)
	}

	if c := reconciledAgain(t, nsA, name); c.Status != metav1.ConditionFalse {
		t.Fatalf("the mirror that had the group first is Stalled: %s: %s", c.Reason, c.Message)
	}
	// Both refused mirrors were created within a second or so: which of them would take
	// the group over is the UID's draw, so the second one goes first.
	if err := env.client.Delete(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, nsB, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
}
