package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestRecreatedMirrorStartsAfresh: a KafkaMirror deleted and created again under the
// same name, with no reconcile in between (kubectl replace --force, a GitOps Replace,
// a busy queue), inherits nothing from the one before: not its autoscaler decision
// (the new one asks for 1 replica and gets 1, not the old 3) and not its topic sync
// (the new one reports a sync of its own, which sees the topic created meanwhile,
// although the old one's sync timer has 10 minutes to run).
func TestRecreatedMirrorStartsAfresh(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, name = "t-recreate", "again"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	src := kafkaAdmin(t, env.source)
	createTopic(t, src, "recreate.a", 1)
	mirror := func(replicas int32) *v1alpha1.KafkaMirror {
		return testMirror(ns, name, `recreate\..*`, func(m *v1alpha1.KafkaMirror) {
			m.Spec.Replicas = ptr.To(replicas)
			m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 5}
			m.Spec.TopicSyncInterval = &metav1.Duration{Duration: 10 * time.Minute}
		})
	}
	r := newIdleReconciler(t)
	old := mirror(3)
	create(t, old)
	synced := func(m *v1alpha1.KafkaMirror, replicas, selected int32) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			r.reconcile(t, m)
			got := &v1alpha1.KafkaMirror{}
			if err := get(got, ns, name); err != nil {
				return err
			}
			if got.UID != m.UID {
				return fmt.Errorf("UID %s, want %s", got.UID, m.UID)
			}
			if got.Status.ObservedGeneration != got.Generation || got.Status.Topics == nil {
				return fmt.Errorf("not synced yet: observedGeneration %d", got.Status.ObservedGeneration)
			}
			if got.Status.Topics.Selected != selected {
				return fmt.Errorf("status.topics.selected %d, want %d", got.Status.Topics.Selected, selected)
			}
			if as := got.Status.Autoscaling; as == nil || as.DesiredReplicas != replicas {
				return fmt.Errorf("status.autoscaling %+v, want desiredReplicas %d", as, replicas)
			}
			d := &appsv1.Deployment{}
			if err := get(d, ns, name+"-mirror"); err != nil {
				return err
			}
			if *d.Spec.Replicas != replicas {
				return fmt.Errorf("Deployment replicas %d, want %d", *d.Spec.Replicas, replicas)
			}
			return nil
		})
	}
	synced(old, 3, 1)
	if r.autoscalers.last(refOf(old)) == nil {
		t.Fatal("the autoscaler remembers no decision for the first KafkaMirror")
	}

	createTopic(t, src, "recreate.b", 1)
	if err := env.client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	fresh := mirror(1)
	testutil.Eventually(t, 30*time.Second, func() error { return env.client.Create(ctx, fresh) })
	synced(fresh, 1, 2)
}
