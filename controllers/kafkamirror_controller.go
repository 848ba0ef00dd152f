package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// KafkaMirrorReconciler turns KafkaMirrors into running mirrors and keeps their target
// topics' partition counts in step with the source.
type KafkaMirrorReconciler struct {
	client.Client
	// APIReader reads Secrets uncached, by name: the operator neither lists nor watches
	// Secrets (secretPoller reads the metadata of the referenced ones) and keeps no
	// Secret data in memory between reconciles.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	// Recorder emits events; nil emits none.
	Recorder events.EventRecorder
	// Image is the mirror image used when spec.pod.image is empty: the operator's own.
	Image string
	// AllowedBootstrapServers bounds the Kafka clusters a KafkaMirror may name; the zero
	// value allows every address.
	AllowedBootstrapServers BootstrapAllowList
	// LeaveUserIDUnset leaves the mirror pods' user, group and fsGroup IDs to the
	// platform (OpenShift's restricted-v2 SCC) instead of pinning them.
	LeaveUserIDUnset bool

	// syncs runs the topic syncs off the reconcile workers; SetupWithManager sets it.
	syncs *topicSyncs
	// applied remembers what was last applied to each child, so an unchanged child is
	// not written again.
	applied appliedObjects
	// autoscalers remembers the lag samples and recommendations of autoscaled mirrors.
	autoscalers autoscaleStates
	// rendered remembers each KafkaMirror's config for its current generation.
	rendered renderedConfigs
	// sourceIndexed is set by SetupWithManager once the cache indexes KafkaMirrors by
	// source bootstrap server (sourceServerIndex).
	sourceIndexed bool
}

// Least privilege: server-side apply needs create and patch (no update); the status is
// only patched; finalizers/update lets owner references block owner deletion. Secrets
// are only read by name (get, never list or watch), through a ClusterRole of their own,
// kafka-mirror-secret-reader (secretReaderRole), which installs bind per namespace: by
// default only in the operator's own (the chart adds rbac.secretNamespaces). A
// KafkaMirror elsewhere is told so (SecretForbidden). TestLeaderElection and
// TestSecretsWithGetOnly run the manager with exactly these rules.
//
// +kubebuilder:rbac:groups=kafkamirror.io,resources=kafkamirrors,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafkamirror.io,resources=kafkamirrors/status,verbs=get;patch
// +kubebuilder:rbac:groups=kafkamirror.io,resources=kafkamirrors/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,roleName=kafka-mirror-secret-reader
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create

// Reconcile runs reconcileSteps, in order, for one KafkaMirror (none while it carries
// kafkamirror.io/reconcile: disabled), and writes the status once, in a defer, from
// what they observed (computeStatus). Each step records what it found in the
// observation and says whether the reconcile goes on.
//
// A spec error or a refused bootstrap server stalls the KafkaMirror and is not retried
// (a conflict with another KafkaMirror, a mirror loop or a shared consumer group, and
// one with a HorizontalPodAutoscaler are looked at again every topicSyncInterval, as
// the other object may change; of two conflicting KafkaMirrors only the later one is
// refused, see holdsOver); an unreachable cluster or missing Secret still writes the
// children, is reported in status and retried with backoff.
//
// The topic sync runs off the reconcile workers (topicSyncs): a reconcile starts one
// only when mirror.yaml or the credentials changed, topicSyncInterval has passed (to
// find new topics and partition expansion) or a failed one is due for a retry, never
// for a child-object event, and reports the latest finished result; a finished sync
// enqueues the KafkaMirror again. An unreachable or hanging cluster so holds no worker.
// While the mirror's pods are not ready, it looks again every notReadyRecheck to name
// what blocks them (pods are not watched).
func (r *KafkaMirrorReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &v1alpha1.KafkaMirror{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		// The children go with their owner references; target topics, their data and
		// the committed offsets stay, on purpose.
		return ctrl.Result{}, nil
	}
	s := &reconcileScope{m: m, obs: &observation{}}
	defer func() {
		if retErr = r.finalizeStatus(ctx, m, s.obs, retErr); retErr != nil {
			res = ctrl.Result{} // an error is retried with backoff; a requeue time is ignored
		}
	}()
	return r.runSteps(ctx, s)
}

// forget drops what the reconciler remembers about a deleted KafkaMirror: its topic
// sync, its Kafka clients (closed when no other KafkaMirror uses them) and the digests
// of its children.
func (r *KafkaMirrorReconciler) forget(key types.NamespacedName) {
	if r.syncs != nil {
		r.syncs.forget(key)
	}
	m := &v1alpha1.KafkaMirror{}
	m.Namespace, m.Name = key.Namespace, key.Name
	r.applied.forget(key.Namespace, configMapName(m), deploymentName(m), serviceName(m), pdbName(m))
	r.rendered.forget(key)
	forgetLag(key.Namespace, key.Name)
	forgetGroups(key.Namespace, key.Name)
	r.autoscalers.forget(key)
}

// notReadyRecheck is how soon a reconcile looks again at a mirror whose pods are not
// ready, to tell starting pods from a crash loop or an image that cannot be pulled.
const notReadyRecheck = 15 * time.Second

// reconcileDisabled tells whether m's reconciliation is paused by
// v1alpha1.ReconcileAnnotation.
func reconcileDisabled(m *v1alpha1.KafkaMirror) bool {
	return m.Annotations[v1alpha1.ReconcileAnnotation] == v1alpha1.ReconcileDisabled
}

// minRetryDelay and maxRetryDelay bound the retry delay of failed reconciles: an unreachable cluster is
// retried quickly at first, and at least every maxRetryDelay afterwards.
const (
	minRetryDelay = time.Second
	maxRetryDelay = time.Minute
)
