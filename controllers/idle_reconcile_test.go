package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// writeCounter counts the writes a client sends to the API server, by kind.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) add(verb string, obj runtime.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, fmt.Sprintf("%s %T", verb, obj))
}

func (w *writeCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

// countingClient wraps c so that every write through it is counted.
func countingClient(c client.WithWatch, w *writeCounter) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.add("apply", nil)
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("patch "+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add("update "+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

// idleReconciler is a reconciler outside the suite's manager, in a namespace that
// manager does not watch, whose writes and Kafka dials are counted and whose
// Reconcile the test calls itself.
type idleReconciler struct {
	*KafkaMirrorReconciler
	writes *writeCounter
	dials  *atomic.Int64
}

func newIdleReconciler(t *testing.T) *idleReconciler {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(env.cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &writeCounter{}
	clients := newKafkaClients()
	dials := &atomic.Int64{}
	clients.dial = func(cl config.Cluster, role string, files secretFiles) (sarama.Client, sarama.ClusterAdmin, error) {
		dials.Add(1)
		return connect(cl, role, files)
	}
	t.Cleanup(clients.closeAll)
	r := &KafkaMirrorReconciler{Client: countingClient(c, w), APIReader: c, Scheme: scheme, Image: testImage}
	r.syncs = newTopicSyncs(clients, ctrl.Log)
	go func() { // play the manager's channel source: drain the "sync finished" events
		for range r.syncs.done {
		}
	}()
	return &idleReconciler{KafkaMirrorReconciler: r, writes: w, dials: dials}
}

func (r *idleReconciler) reconcile(t *testing.T, m *v1alpha1.KafkaMirror) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// TestUnchangedReconcileWritesNothing: once a KafkaMirror is reconciled, a reconcile
// that finds nothing changed writes nothing to the API server (no apply of an unchanged
// child, no status patch), and its topic sync on the sync timer reuses the cached Kafka
// clients instead of dialling. An edited child is still reverted, and a spec change is
// still written.
func TestUnchangedReconcileWritesNothing(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-idle", "idle"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	src := kafkaAdmin(t, env.source)
	createTopic(t, src, "idle.a", 2)
	m := testMirror(ns, name, `idle\..*`)
	create(t, m)
	r := newIdleReconciler(t)

	// The first reconciles write the children and, once the topic sync finished, the status.
	testutil.Eventually(t, 30*time.Second, func() error {
		r.reconcile(t, m)
		if _, c, err := mirrorCondition(ns, name, v1alpha1.ConditionTopicsSynced); err != nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("topics not synced yet (%v, %+v)", err, c)
		}
		return nil
	})
	if got := r.writes.take(); len(got) < 4 {
		t.Fatalf("the first reconciles wrote %q, want at least the three children and the status", got)
	}
	before := resourceVersions(t, ns, name)
	dialsBefore := r.dials.Load()
	if dialsBefore != 2 {
		t.Errorf("the first sync dialled %d times, want 2 (source and target)", dialsBefore)
	}

	t.Run("a child-event reconcile writes nothing and runs no sync", func(t *testing.T) {
		for range 3 {
			r.reconcile(t, m)
		}
		if got := r.writes.take(); len(got) != 0 {
			t.Errorf("reconciles with nothing changed wrote %q, want nothing", got)
		}
		expect(t, "resourceVersions", fmt.Sprint(resourceVersions(t, ns, name)), fmt.Sprint(before))
	})

	t.Run("the sync timer re-syncs on the cached clients and writes nothing", func(t *testing.T) {
		key := client.ObjectKeyFromObject(m)
		r.syncs.mu.Lock()
		syncedAt := r.syncs.state[key].at
		r.syncs.mu.Unlock()
		time.Sleep(testSyncInterval)
		testutil.Eventually(t, 30*time.Second, func() error {
			r.reconcile(t, m)
			r.syncs.mu.Lock()
			defer r.syncs.mu.Unlock()
			if st := r.syncs.state[key]; st.running != nil || !st.at.After(syncedAt) {
				return fmt.Errorf("no new sync finished yet")
			}
			return nil
		})
		r.reconcile(t, m) // reports the new sync's result: the same as before
		if got := r.writes.take(); len(got) != 0 {
			t.Errorf("a re-sync that found nothing new wrote %q, want nothing", got)
		}
		expect(t, "resourceVersions", fmt.Sprint(resourceVersions(t, ns, name)), fmt.Sprint(before))
		expect(t, "Kafka dials", r.dials.Load(), dialsBefore)
		expect(t, "cached Kafka clients", r.syncs.clients.size(), 2)
	})

	t.Run("an edited child is reverted", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		if err := get(cm, ns, name+"-mirror-config"); err != nil {
			t.Fatal(err)
		}
		want := cm.Data[configKey]
		cm.Data[configKey] = "edited by hand"
		if err := env.client.Update(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		r.reconcile(t, m)
		if err := get(cm, ns, name+"-mirror-config"); err != nil {
			t.Fatal(err)
		}
		expect(t, "mirror.yaml after the reconcile", cm.Data[configKey], want)
		if got := r.writes.take(); len(got) != 1 {
			t.Errorf("reverting one edited child wrote %q, want one apply", got)
		}
	})

	t.Run("a spec change is written", func(t *testing.T) {
		if err := get(m, ns, name); err != nil {
			t.Fatal(err)
		}
		m.Spec.Streams = 3
		if err := env.client.Update(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, func() error {
			r.reconcile(t, m)
			got := &v1alpha1.KafkaMirror{}
			if err := get(got, ns, name); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTopicsSynced); got.Status.ObservedGeneration != got.Generation || c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("generation %d not observed yet (status at %d)", got.Generation, got.Status.ObservedGeneration)
			}
			return nil
		})
		include, err := configInclude(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, "include", fmt.Sprint(include), "[idle\\..*]")
		cm := &corev1.ConfigMap{}
		if err := get(cm, ns, name+"-mirror-config"); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse([]byte(cm.Data[configKey]))
		if err != nil {
			t.Fatal(err)
		}
		expect(t, "streams in mirror.yaml", cfg.Streams, 3)
		expect(t, "Kafka dials after a spec change on the same clusters", r.dials.Load(), dialsBefore)
	})
}
