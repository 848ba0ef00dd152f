package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// applyChildren writes the ConfigMap, Deployment, metrics Service and (with more than
// one replica) PodDisruptionBudget of m, and returns the Deployment as the API server
// has it, status included. files nil means the referenced Secrets could not be read:
// the Deployment then keeps the config hash it has, so that a missing Secret or a
// failed read does not roll pods that are running with what they mounted.
func (r *KafkaMirrorReconciler) applyChildren(ctx context.Context, m *v1alpha1.KafkaMirror, cfg *config.Config, files secretFiles) (*appsv1.Deployment, error) {
	mirrorYAML, err := r.rendered.mirrorYAML(m, cfg)
	if err != nil {
		return nil, fmt.Errorf("while rendering mirror.yaml: %w", err)
	}
	if err := r.apply(ctx, mirrorConfigMap(m, mirrorYAML)); err != nil {
		return nil, err
	}
	hash := configHash(mirrorYAML, files)
	if files == nil {
		hash = r.currentConfigHash(ctx, m, hash)
	}
	d := mirrorDeployment(m, r.Image, hash)
	if r.LeaveUserIDUnset {
		unpinUserID(&d.Spec.Template.Spec)
	}
	if err := r.apply(ctx, d); err != nil {
		return nil, err
	}
	if err := r.apply(ctx, metricsService(m)); err != nil {
		return d, err
	}
	if wantsPDB(m) {
		return d, r.apply(ctx, podDisruptionBudget(m))
	}
	return d, r.deletePDB(ctx, m)
}

// currentConfigHash is the config hash on m's Deployment, or def when there is none.
func (r *KafkaMirrorReconciler) currentConfigHash(ctx context.Context, m *v1alpha1.KafkaMirror, def string) string {
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: deploymentName(m)}, d); err != nil {
		return def
	}
	if h := d.Spec.Template.Annotations[ConfigHashAnnotation]; h != "" {
		return h
	}
	return def
}

// configHash changes exactly when mirror.yaml or a referenced Secret key changes.
func configHash(mirrorYAML []byte, files secretFiles) string {
	h := sha256.New()
	h.Write(mirrorYAML)
	h.Write([]byte(files.hash()))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// apply writes obj with server-side apply under FieldOwner, taking ownership of every
// field obj sets, so that edits to those fields are reverted and other fields (set by
// people or other controllers) are left alone. obj is updated with the API server's
// answer.
//
// A reconcile that finds nothing to do writes nothing: when the object in the cache
// has the resourceVersion the API server gave back to the last apply of the same
// intent (its digest), nobody has changed it since, and it is not sent again. Any other
// write to it (an edit, a rollout's status) moves the resourceVersion and the next
// reconcile applies again, which reverts edits as before. After a restart the first
// reconcile of each child applies once.
//
// The builders return typed objects (readable, and testable without a cluster); they
// are sent as unstructured without status, the only part of them that is not intent.
func (r *KafkaMirrorReconciler) apply(ctx context.Context, obj client.Object) error {
	digest, err := intentDigest(obj)
	if err != nil {
		return fmt.Errorf("while hashing %T %q: %w", obj, obj.GetName(), err)
	}
	key := appliedKey{kind: fmt.Sprintf("%T", obj), namespace: obj.GetNamespace(), name: obj.GetName()}
	if r.unchangedSinceApply(ctx, key, digest, obj) {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("while converting %T %q for apply: %w", obj, obj.GetName(), err)
	}
	delete(u, "status")
	ac := &unstructured.Unstructured{Object: u}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(ac), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("while applying %s %q: %w", ac.GetKind(), obj.GetName(), err)
	}
	r.applied.remember(key, digest, ac.GetResourceVersion())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ac.Object, obj); err != nil {
		return fmt.Errorf("while reading back %s %q: %w", ac.GetKind(), obj.GetName(), err)
	}
	return nil
}

// unchangedSinceApply tells whether the cached copy of obj is exactly what the last
// apply of digest left; it then fills obj with that copy (status included).
func (r *KafkaMirrorReconciler) unchangedSinceApply(ctx context.Context, key appliedKey, digest string, obj client.Object) bool {
	rv, ok := r.applied.lookup(key, digest)
	if !ok {
		return false
	}
	cur, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false
	}
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil || cur.GetResourceVersion() != rv {
		return false
	}
	// Both are pointers to the same struct type: copy the cached object over obj.
	dst, src := reflect.ValueOf(obj), reflect.ValueOf(cur)
	if dst.Kind() != reflect.Pointer || dst.Type() != src.Type() {
		return false
	}
	dst.Elem().Set(src.Elem())
	return true
}

// intentDigest digests an object as a builder returned it: the intent of an apply.
func intentDigest(obj client.Object) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// appliedKey names one child object.
type appliedKey struct{ kind, namespace, name string }

// appliedObjects remembers, per child object, the digest of the intent last applied and
// the resourceVersion the API server answered with. Its zero value is ready to use.
type appliedObjects struct {
	mu sync.Mutex
	m  map[appliedKey]appliedState
}

type appliedState struct{ digest, resourceVersion string }

func (a *appliedObjects) remember(key appliedKey, digest, rv string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[appliedKey]appliedState{}
	}
	a.m[key] = appliedState{digest: digest, resourceVersion: rv}
}

// lookup returns the resourceVersion the last apply of digest to key left.
func (a *appliedObjects) lookup(key appliedKey, digest string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.m[key]
	if !ok || st.digest != digest || st.resourceVersion == "" {
		return "", false
	}
	return st.resourceVersion, true
}

// forget drops what was remembered about the children of one KafkaMirror.
func (a *appliedObjects) forget(namespace string, names ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.m {
		if k.namespace != namespace {
			continue
		}
		for _, n := range names {
			if k.name == n {
				delete(a.m, k)
			}
		}
	}
}

// deletePDB removes the PodDisruptionBudget once m runs at most one pod.
func (r *KafkaMirrorReconciler) deletePDB(ctx context.Context, m *v1alpha1.KafkaMirror) error {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: pdbName(m)}, pdb)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("while reading PodDisruptionBudget %q: %w", pdbName(m), err)
	}
	if !metav1.IsControlledBy(pdb, m) {
		return nil
	}
	if err := r.Delete(ctx, pdb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("while deleting PodDisruptionBudget %q: %w", pdbName(m), err)
	}
	return nil
}
