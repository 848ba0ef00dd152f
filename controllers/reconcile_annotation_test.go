package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// configInclude returns spec.topics.include as the ConfigMap's mirror.yaml renders it.
func configInclude(ns, name string) ([]string, error) {
	cm := &corev1.ConfigMap{}
	if err := get(cm, ns, name+"-mirror-config"); err != nil {
		return nil, err
	}
	cfg, err := config.Parse([]byte(cm.Data[configKey]))
	if err != nil {
		return nil, err
	}
	return cfg.Topics.Include, nil
}

// updateMirror applies change to the KafkaMirror, retrying on conflicts.
func updateMirror(t *testing.T, ns, name string, change func(*v1alpha1.KafkaMirror)) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return err
		}
		change(m)
		return env.client.Update(context.Background(), m)
	})
}

// TestReconcileAnnotationPauses: with kafkamirror.io/reconcile: disabled a deleted
// Deployment stays deleted and a spec change does not reach the ConfigMap, though the
// operator did reconcile after both (its Reconciling condition is at the new
// generation); removing the annotation restores both.
func TestReconcileAnnotationPauses(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-pause", "paused"
	create(t, testMirror(ns, name, `pause\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)
	d := &appsv1.Deployment{}
	testutil.Eventually(t, 90*time.Second, func() error { return get(d, ns, name+"-mirror") })

	updateMirror(t, ns, name, func(m *v1alpha1.KafkaMirror) {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.ReconcileAnnotation, v1alpha1.ReconcileDisabled)
	})
	_, c := waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonReconcileDisabled)
	t.Logf("Reconciling: %s", c.Message)

	if err := env.client.Delete(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	updateMirror(t, ns, name, func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Include = []string{`paused\..*`} })
	// The reconcile of the new generation ran (the condition is at it) and left
	// everything alone.
	m, _ := waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonReconcileDisabled)
	if m.Status.ObservedGeneration == m.Generation {
		t.Errorf("observedGeneration %d moved to the unapplied generation", m.Status.ObservedGeneration)
	}
	if err := get(&appsv1.Deployment{}, ns, name+"-mirror"); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted Deployment came back while paused (err %v)", err)
	}
	include, err := configInclude(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "include while paused", include, []string{`pause\..*`})

	// Removing the annotation resumes: the Deployment is back, the spec is applied.
	updateMirror(t, ns, name, func(m *v1alpha1.KafkaMirror) { delete(m.Annotations, v1alpha1.ReconcileAnnotation) })
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(&appsv1.Deployment{}, ns, name+"-mirror"); err != nil {
			return err
		}
		include, err := configInclude(ns, name)
		if err != nil {
			return err
		}
		if len(include) != 1 || include[0] != `paused\..*` {
			return fmt.Errorf("include is %q, want the new spec's", include)
		}
		return nil
	})
	// Nothing marks the Deployment ready in envtest: Reconciling says it rolls out.
	m, _ = waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing)
	if m.Status.ObservedGeneration != m.Generation {
		t.Errorf("observedGeneration %d after resuming, want %d", m.Status.ObservedGeneration, m.Generation)
	}
}
