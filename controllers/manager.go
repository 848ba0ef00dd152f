package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// DefaultLeaderElectionID is the name of the Lease the operator replicas compete for.
const DefaultLeaderElectionID = "kafka-mirror-operator.kafkamirror.io"

// ManagerOptions configure NewManager. `kafka-mirror manager` fills them from flags.
type ManagerOptions struct {
	// Image is the mirror image for KafkaMirrors without spec.pod.image: the operator's
	// own, which holds the engine too. Required.
	Image string
	// WatchNamespaces limits the operator to these namespaces; empty watches all.
	WatchNamespaces []string
	// MetricsAddress serves the operator's Prometheus metrics; "0" turns them off.
	MetricsAddress string
	// SecureMetrics serves /metrics over HTTPS, only to clients that authenticate with a
	// Kubernetes token (TokenReview) and may `get` the nonResourceURL /metrics
	// (SubjectAccessReview). `kafka-mirror manager` turns it on by default.
	SecureMetrics bool
	// MetricsCertDir holds tls.crt and tls.key for the HTTPS metrics server; empty (or a
	// directory without them) serves a self-signed certificate generated in memory.
	MetricsCertDir string
	// AllowedBootstrapServers are host:port patterns (`*` for any run of characters but
	// ':') a KafkaMirror's bootstrap servers must match; empty allows every address.
	AllowedBootstrapServers []string
	// AllowedEndpoints are URL patterns (scheme://host[:port][/path], `*` for any run of
	// characters but ':' and '/' in the host and port, any characters in the path) every
	// endpoint a KafkaMirror makes the operator or its pods call must match (token URLs
	// now). They apply once either allow-list is set: an operator that bounds its Kafka
	// clusters refuses every endpoint it was not told about.
	AllowedEndpoints []string
	// AllowAssumeRole lets the operator's topic sync assume a KafkaMirror's
	// sasl.aws.roleArn with the operator's own AWS identity. Default false: such a
	// KafkaMirror is Stalled (AssumeRoleNotAllowed).
	AllowAssumeRole bool
	// RefusePrivilegedPods stalls a KafkaMirror whose spec.pod settings go beyond the
	// "restricted" Pod Security Standard (PrivilegedPodNotAllowed), naming each field.
	RefusePrivilegedPods bool
	// HealthProbeAddress serves /healthz and /readyz; "0" turns them off.
	HealthProbeAddress string
	// LeaderElection makes replicas of the operator elect one leader through a Lease;
	// only the leader reconciles.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease. Default: the namespace the operator runs
	// in (read from its service account), required outside a cluster.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease. Default DefaultLeaderElectionID.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero keeps
	// controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MaxConcurrentReconciles is how many KafkaMirrors are reconciled at once. Default 4:
	// a topic sync waits on Kafka, so one slow cluster must not hold up the others.
	MaxConcurrentReconciles int
	// LeaveUserIDUnset leaves runAsUser, runAsGroup and fsGroup of the mirror pods unset
	// instead of pinning them to the image's nonroot user (65532), so that OpenShift's
	// restricted-v2 SCC, which refuses pinned IDs outside the namespace's range, assigns
	// them. `kafka-mirror manager --pin-user-id=false` sets it.
	LeaveUserIDUnset bool
	// SecretPollInterval is how often the operator reads the metadata of the Secrets
	// KafkaMirrors reference, to notice a change (a rotation rolls the mirror pods)
	// with only `get` on Secrets. Default DefaultSecretPollInterval.
	SecretPollInterval time.Duration
	// SkipControllerNameValidation allows several managers in one process (tests).
	SkipControllerNameValidation bool
	// Logger is the manager's and the reconciler's logger.
	Logger logr.Logger
}

// NewScheme returns a scheme with the built-in types and kafkamirror.io/v1alpha1.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("while building the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("while building the scheme: %w", err)
	}
	return s, nil
}

// NewManager returns a manager running the KafkaMirror controller, with health checks,
// metrics and (optionally) leader election. Start it with Start(ctx); it stops when ctx
// ends and, as leader, gives up the Lease at once so another replica takes over.
func NewManager(cfg *rest.Config, o ManagerOptions) (manager.Manager, error) {
	if o.Image == "" {
		return nil, errors.New("the mirror image is required (--engine-image or KAFKA_MIRROR_IMAGE)")
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	allowed, err := NewBootstrapAllowList(o.AllowedBootstrapServers)
	if err != nil {
		return nil, fmt.Errorf("while reading the allowed bootstrap servers: %w", err)
	}
	if allowed, err = allowed.WithEndpoints(o.AllowedEndpoints); err != nil {
		return nil, fmt.Errorf("while reading the allowed endpoints: %w", err)
	}
	allowed = allowed.WithAssumeRole(o.AllowAssumeRole)
	// The operator caches only the children it manages (by label), not every
	// Deployment, ConfigMap and Service of the cluster.
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: FieldOwner})}
	opts := ctrl.Options{
		Scheme: scheme,
		Logger: o.Logger,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            managed,
			&corev1.ConfigMap{}:             managed,
			&corev1.Service{}:               managed,
			&policyv1.PodDisruptionBudget{}: managed,
			&batchv1.Job{}:                  managed,
		}},
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.HealthProbeAddress,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	}
	if len(o.WatchNamespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	for _, d := range []struct {
		v   time.Duration
		set **time.Duration
	}{{o.LeaseDuration, &opts.LeaseDuration}, {o.RenewDeadline, &opts.RenewDeadline}, {o.RetryPeriod, &opts.RetryPeriod}} {
		if d.v > 0 {
			v := d.v
			*d.set = &v
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("while creating the manager: %w", err)
	}
	if o.HealthProbeAddress != "0" && o.HealthProbeAddress != "" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, fmt.Errorf("while adding the health check: %w", err)
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, fmt.Errorf("while adding the readiness check: %w", err)
		}
	}
	r := &KafkaMirrorReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  mgr.GetEventRecorder(FieldOwner),
		Image:     o.Image,

		LeaveUserIDUnset: o.LeaveUserIDUnset,

		AllowedBootstrapServers: allowed,
	}
	r.rendered.refusePrivileged = o.RefusePrivilegedPods
	if err := r.SetupWithManager(mgr, o); err != nil {
		return nil, err
	}
	return mgr, nil
}

// metricsOptions serves /metrics as o says: plain HTTP, or (SecureMetrics) HTTPS with
// controller-runtime's authentication and authorisation filter, as kubebuilder's layout
// does. The filter asks the API server: a TokenReview for the bearer token, then a
// SubjectAccessReview for `get` on the nonResourceURL /metrics.
func metricsOptions(o ManagerOptions) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.MetricsAddress}
	if o.SecureMetrics {
		opts.SecureServing = true
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		// Without tls.crt and tls.key in CertDir, controller-runtime generates a
		// self-signed certificate in memory (nothing is written to disk).
		opts.CertDir = o.MetricsCertDir
	}
	return opts
}

// SetupWithManager registers the controller: KafkaMirrors (spec changes only, so the
// operator's own status writes do not loop), the children it owns, a change to a
// referenced Secret (found by secretPoller, which needs only `get` on Secrets, where a
// watch would need list and watch on every Secret) and the end of each topic sync,
// which runs off the workers.
func (r *KafkaMirrorReconciler) SetupWithManager(mgr manager.Manager, o ManagerOptions) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.KafkaMirror{}, sourceServerIndex, func(obj client.Object) []string {
		m, ok := obj.(*v1alpha1.KafkaMirror)
		if !ok {
			return nil
		}
		return sourceServers(m)
	})
	if err != nil {
		return fmt.Errorf("while indexing KafkaMirrors by source bootstrap server: %w", err)
	}
	r.sourceIndexed = true
	clients := newKafkaClients()
	r.syncs = newTopicSyncs(clients, mgr.GetLogger().WithName("topicsync"))
	// The cached Kafka clients are closed when the manager stops.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		clients.closeAll()
		return nil
	})); err != nil {
		return fmt.Errorf("while adding the Kafka client cache: %w", err)
	}
	secretChanged := make(chan event.GenericEvent)
	poll := o.SecretPollInterval
	if poll <= 0 {
		poll = DefaultSecretPollInterval
	}
	if err := mgr.Add(&secretPoller{mirrors: mgr.GetClient(), secrets: r.APIReader, every: poll,
		changed: secretChanged, log: mgr.GetLogger().WithName("secretpoller")}); err != nil {
		return fmt.Errorf("while adding the Secret poller: %w", err)
	}
	skip := o.SkipControllerNameValidation
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.KafkaMirror{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, reconcileAnnotationChanged))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// The failover Job's progress (spec.failover).
		Owns(&batchv1.Job{}).
		// A failover completed (or changed) that failback mirrors wait for
		// (spec.initialPositions.fromFailover).
		Watches(&v1alpha1.KafkaMirror{}, r.watchFailbacks(), builder.WithPredicates(failbackRelevant)).
		// A referenced Secret changed (secretPoller).
		WatchesRawSource(source.Channel(secretChanged, &handler.EnqueueRequestForObject{})).
		// A finished topic sync (run off the workers) enqueues its KafkaMirror.
		WatchesRawSource(source.Channel(r.syncs.done, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: o.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](minRetryDelay, maxRetryDelay),
			SkipNameValidation:      &skip,
		}).
		Complete(r)
}

// reconcileAnnotationChanged lets through the updates that set, change or remove
// v1alpha1.ReconcileAnnotation, which GenerationChangedPredicate drops (metadata does not
// move the generation), so that removing it resumes the mirror at once. Other
// annotation changes (kubectl's last-applied configuration, for one) stay filtered out.
var reconcileAnnotationChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return e.ObjectOld.GetAnnotations()[v1alpha1.ReconcileAnnotation] != e.ObjectNew.GetAnnotations()[v1alpha1.ReconcileAnnotation]
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
