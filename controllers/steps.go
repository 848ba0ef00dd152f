package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// reconcileSteps are the steps of one reconcile, in order (Cluster API's phases). A
// step records what it found in the scope's observation, never in conditions
// (computeStatus does that, once), and says whether the reconcile goes on.
var reconcileSteps = []reconcileStep{
	{"check the reconcile annotation", (*KafkaMirrorReconciler).checkReconcileAnnotation},
	{"validate the spec", (*KafkaMirrorReconciler).validateSpec},
	{"check the bootstrap allow-list", specCheck((*KafkaMirrorReconciler).checkBootstrapAllowList)},
	{"look for a mirror loop", specCheck((*KafkaMirrorReconciler).checkMirrorLoop)},
	{"look for another mirror with the consumer group", specCheck((*KafkaMirrorReconciler).checkConsumerGroup)},
	{"look for a conflicting autoscaler", specCheck((*KafkaMirrorReconciler).checkAutoscalerConflict)},
	{"resolve the initial positions", (*KafkaMirrorReconciler).resolveInitialPositions},
	{"read Secrets", (*KafkaMirrorReconciler).readSecrets},
	{"fail over", (*KafkaMirrorReconciler).failoverStep},
	{"sync topics", (*KafkaMirrorReconciler).syncTopicsStep},
	{"autoscale", (*KafkaMirrorReconciler).autoscaleStep},
	{"write children", (*KafkaMirrorReconciler).writeChildren},
	{"diagnose pods", (*KafkaMirrorReconciler).diagnosePodsStep},
	{"schedule the next look", (*KafkaMirrorReconciler).scheduleNext},
}

// reconcileStep is one named step of a reconcile. run returns stop true when the
// reconcile ends after it, with res as its result; an error always ends it.
type reconcileStep struct {
	name string
	run  func(r *KafkaMirrorReconciler, ctx context.Context, s *reconcileScope) (stepResult, error)
}

// stepResult says whether the reconcile goes on after a step and, when it does not,
// with which result.
type stepResult struct {
	stop bool
	res  ctrl.Result
}

// goOn lets the reconcile go on to the next step.
var goOn = stepResult{}

// stopWith ends the reconcile with res.
func stopWith(res ctrl.Result) stepResult { return stepResult{stop: true, res: res} }

// reconcileScope is what one reconcile works on: the KafkaMirror, what its steps
// observed, and what a step hands to the later ones.
type reconcileScope struct {
	m   *v1alpha1.KafkaMirror
	obs *observation
	// files are the referenced Secrets' contents; nil when they could not be read.
	files secretFiles
	// live is m with this reconcile's replica decision (withAutoscaling).
	live *v1alpha1.KafkaMirror
	// next is how soon to look again when no event comes first.
	next time.Duration
	// notReady is true when the mirror's pods are wanted and not all ready.
	notReady bool
}

// runSteps runs reconcileSteps until one ends the reconcile.
func (r *KafkaMirrorReconciler) runSteps(ctx context.Context, s *reconcileScope) (ctrl.Result, error) {
	for _, step := range reconcileSteps {
		out, err := step.run(r, ctx, s)
		if err != nil || out.stop {
			logr.FromContextOrDiscard(ctx).V(1).Info("Reconcile ended", "step", step.name, "error", errString(err))
			return out.res, err
		}
	}
	return ctrl.Result{}, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkReconcileAnnotation ends the reconcile while v1alpha1.ReconcileAnnotation pauses
// it: no child, no Kafka; the status says so.
func (r *KafkaMirrorReconciler) checkReconcileAnnotation(_ context.Context, s *reconcileScope) (stepResult, error) {
	if s.obs.disabled = reconcileDisabled(s.m); s.obs.disabled {
		return stopWith(ctrl.Result{}), nil
	}
	return goOn, nil
}

// validateSpec renders the engine config from the spec and validates it (once per
// generation); an invalid spec stalls the KafkaMirror.
func (r *KafkaMirrorReconciler) validateSpec(_ context.Context, s *reconcileScope) (stepResult, error) {
	if s.obs.config, s.obs.invalid = r.rendered.validate(s.m); s.obs.invalid != nil {
		return stall(s.obs.invalid)
	}
	return goOn, nil
}

// specCheck turns a check of the valid spec against the world into a step: a problem
// it finds stalls the KafkaMirror; a failure to look is returned as it is.
func specCheck(check func(r *KafkaMirrorReconciler, ctx context.Context, m *v1alpha1.KafkaMirror, cfg *config.Config) (problem, err error)) func(*KafkaMirrorReconciler, context.Context, *reconcileScope) (stepResult, error) {
	return func(r *KafkaMirrorReconciler, ctx context.Context, s *reconcileScope) (stepResult, error) {
		problem, err := check(r, ctx, s.m, s.obs.config)
		switch {
		case err != nil:
			return goOn, err
		case problem == nil:
			return goOn, nil
		}
		s.obs.invalid = problem
		if lookAgainLater(problem) {
			// Another object's change can end it: look again later.
			return stopWith(ctrl.Result{RequeueAfter: s.obs.config.TopicSyncInterval.Duration}), nil
		}
		return stall(problem)
	}
}

// stall ends the reconcile on a spec problem that only a spec change can fix: it is
// not retried. The running Deployment keeps its last good config until then.
func stall(problem error) (stepResult, error) {
	return stopWith(ctrl.Result{}), reconcile.TerminalError(problem)
}

// lookAgainLater tells whether a spec problem may end without a change to this
// KafkaMirror (the other mirror of a loop or of the consumer group changes or goes, the
// HorizontalPodAutoscaler goes).
func lookAgainLater(problem error) bool {
	var group *consumerGroupInUseError
	return isMirrorLoop(problem) || isAutoscalerConflict(problem) || errors.As(problem, &group)
}

// checkBootstrapAllowList refuses bootstrap servers outside the operator's allow-list.
func (r *KafkaMirrorReconciler) checkBootstrapAllowList(_ context.Context, m *v1alpha1.KafkaMirror, _ *config.Config) (error, error) {
	return checkReach(m, r.AllowedBootstrapServers), nil
}

// readSecrets reads the referenced Secrets. A failure is reported in status and
// retried, and the children are still written (keeping their Secret hash: no roll on a
// read failure).
func (r *KafkaMirrorReconciler) readSecrets(ctx context.Context, s *reconcileScope) (stepResult, error) {
	s.next = s.obs.config.TopicSyncInterval.Duration
	s.files, s.obs.secretErr = readSecretFiles(ctx, r.APIReader, s.m)
	if s.obs.secretErr != nil {
		s.files = nil
	}
	return goOn, nil
}

// syncTopicsStep reports the latest topic sync, starting one when it is due (see
// topicSyncs); without the Secrets there is nothing to connect with.
func (r *KafkaMirrorReconciler) syncTopicsStep(ctx context.Context, s *reconcileScope) (stepResult, error) {
	if s.obs.secretErr != nil {
		return goOn, nil
	}
	var err error
	s.obs.topics, s.obs.topicsRan, s.obs.topicsFresh, s.next, err = r.syncs.observe(ctx, s.m, s.obs.config, s.files)
	return goOn, err
}

// autoscaleStep decides the replica count with spec.autoscaling (autoscale).
func (r *KafkaMirrorReconciler) autoscaleStep(ctx context.Context, s *reconcileScope) (stepResult, error) {
	var err error
	if s.obs.autoscaling, err = r.autoscale(ctx, s.m, s.obs); err != nil {
		return goOn, err
	}
	s.live = withAutoscaling(s.m, s.obs.autoscaling)
	return goOn, nil
}

// writeChildren applies the ConfigMap, Deployment, Service and PodDisruptionBudget.
func (r *KafkaMirrorReconciler) writeChildren(ctx context.Context, s *reconcileScope) (stepResult, error) {
	s.obs.deployment, s.obs.childErr = r.applyChildren(ctx, s.live, s.obs.config, s.files)
	return goOn, s.obs.childErr
}

// diagnosePodsStep names what keeps the mirror's pods from being ready when a person
// must act. A failure to look is logged, not fatal: Ready stays DeploymentNotReady.
func (r *KafkaMirrorReconciler) diagnosePodsStep(ctx context.Context, s *reconcileScope) (stepResult, error) {
	want := desiredReplicas(s.live)
	if s.notReady = want > 0 && !deploymentReady(s.obs.deployment, want); !s.notReady {
		return goOn, nil
	}
	var err error
	if s.obs.podProblem, err = diagnosePods(ctx, r.APIReader, s.live, s.obs.deployment); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Failed to list the mirror pods")
	}
	return goOn, nil
}

// scheduleNext ends a reconcile that got through every step. Transient failures are
// returned so the work queue retries them with backoff (the status already says what
// failed); otherwise the next look is due at the next topic sync, or sooner while the
// pods are not ready: pods are not watched, and a crash loop or a stuck rollout
// changes no object the operator watches.
func (r *KafkaMirrorReconciler) scheduleNext(_ context.Context, s *reconcileScope) (stepResult, error) {
	secretErr := s.obs.secretErr
	var forbidden *forbiddenSecretError
	if errors.As(secretErr, &forbidden) {
		// Not transient: only an RBAC grant fixes it, and secretPoller notices that.
		secretErr = nil
	}
	if err := errors.Join(secretErr, s.obs.topics.err); err != nil {
		return stopWith(ctrl.Result{}), err
	}
	next := s.next
	if s.notReady {
		next = min(next, notReadyRecheck)
	}
	return stopWith(ctrl.Result{RequeueAfter: next}), nil
}
