package controllers

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// A failback mirror (spec.initialPositions.fromFailover: <name>) mirrors back what was
// written to the target of the failed-over KafkaMirror <name> after its cutover. The
// engine finds the failback points itself, in that mirror's progress on the failback
// mirror's source cluster (mirror.yaml initialPositions.fromFailover: <its consumer
// group>); the operator only checks that the named failover is one to fail back from,
// holds the mirror back until it is, and renders the group.

// fromFailoverIndexPrefix marks a spec.initialPositions.fromFailover among peerIndex's
// values: a bootstrap server (host:port) never contains a space.
const fromFailoverIndexPrefix = "initialPositions.fromFailover "

// fromFailoverIndexValue is a failback mirror's peerIndex value for the KafkaMirror it
// fails back from (in its own namespace: the cache indexes per namespace too).
func fromFailoverIndexValue(name string) string { return fromFailoverIndexPrefix + name }

// fromFailoverPath is the field a failback problem is reported at.
const fromFailoverPath = "spec.initialPositions.fromFailover"

// initialPositionsError says why the KafkaMirror named by spec.initialPositions.fromFailover
// cannot be failed back from yet (reason WaitingForFailover) or at all (reason
// FailoverNotUsable, a stall).
type initialPositionsError struct {
	reason, named, why string
}

func (e *initialPositionsError) Error() string {
	return fmt.Sprintf("%s: %q: %s", fromFailoverPath, e.named, e.why)
}

// stalls tells whether only a person can end the problem (the named failover failed,
// or it went to another cluster); the others end when the failover completes.
func (e *initialPositionsError) stalls() bool { return e.reason == v1alpha1.ReasonFailoverNotUsable }

// resolveInitialPositions holds a failback mirror back until the KafkaMirror it names
// completed a failover into its source cluster, and then renders that mirror's consumer
// group as mirror.yaml initialPositions.fromFailover. The resolution is kept in
// status.initialPositions: once the mirror started, the named KafkaMirror may go.
func (r *KafkaMirrorReconciler) resolveInitialPositions(ctx context.Context, s *reconcileScope) (stepResult, error) {
	ip := s.m.Spec.InitialPositions
	if ip == nil {
		return goOn, nil
	}
	resolved := s.m.Status.InitialPositions
	if resolved == nil || resolved.FromFailover != ip.FromFailover || resolved.ConsumerGroup == "" {
		named := &v1alpha1.KafkaMirror{}
		err := r.Get(ctx, client.ObjectKey{Namespace: s.m.Namespace, Name: ip.FromFailover}, named)
		switch {
		case apierrors.IsNotFound(err):
			named = nil
		case err != nil:
			return stopWith(ctrl.Result{}), fmt.Errorf("while reading the KafkaMirror %s named by %s: %w", ip.FromFailover, fromFailoverPath, err)
		}
		if problem := failbackProblem(s.m, named); problem != nil {
			if problem.stalls() {
				s.obs.invalid = problem
				return stall(problem)
			}
			s.obs.failbackProblem = problem
			// The watch on the named KafkaMirror ends the wait; the requeue is a net.
			return stopWith(ctrl.Result{RequeueAfter: s.obs.config.TopicSyncInterval.Duration}), nil
		}
		resolved = &v1alpha1.InitialPositionsStatus{FromFailover: ip.FromFailover, ConsumerGroup: ConsumerGroup(named), ResolvedTime: ptr.To(metav1.Now())}
	}
	s.obs.initialPositions = resolved
	s.obs.config = r.rendered.withInitialPositions(s.m, s.obs.config, resolved.ConsumerGroup)
	return goOn, nil
}

// failbackProblem says why m cannot fail back from named (nil when it does not
// exist): nil when named completed a failover into m's source cluster. The two are the
// same cluster when they share a bootstrap server (compared without case), as for the
// mirror-loop and consumer-group checks.
func failbackProblem(m, named *v1alpha1.KafkaMirror) *initialPositionsError {
	name := m.Spec.InitialPositions.FromFailover
	wait := func(why string) *initialPositionsError {
		return &initialPositionsError{reason: v1alpha1.ReasonWaitingForFailover, named: name, why: why}
	}
	refuse := func(why string) *initialPositionsError {
		return &initialPositionsError{reason: v1alpha1.ReasonFailoverNotUsable, named: name, why: why}
	}
	if named == nil {
		return wait(fmt.Sprintf("no KafkaMirror of that name in namespace %s; the mirror starts once it exists and its failover completed", m.Namespace))
	}
	if !RenderConfig(named).Target.SameClusterAs(RenderConfig(m).Source) {
		return refuse(fmt.Sprintf("its target cluster (%s) is not this mirror's source cluster (%s): they share no bootstrap server; a failback reads the cluster the failover went to",
			strings.Join(named.Spec.Target.BootstrapServers, ","), strings.Join(m.Spec.Source.BootstrapServers, ",")))
	}
	f := named.Status.Failover
	switch {
	case named.Spec.Failover == nil:
		return wait("it declares no failover (spec.failover); the mirror starts once its failover completed")
	case f == nil || f.Phase == "" || f.Phase == v1alpha1.FailoverPending:
		return wait("its failover has not started yet; the mirror starts once it completed")
	case f.Phase == v1alpha1.FailoverFailed:
		return refuse(fmt.Sprintf("its failover failed (%s); delete its Job %s-failover to run it again, and the mirror starts once it completed", f.Message, named.Name))
	case f.Phase != v1alpha1.FailoverCompleted:
		return wait(fmt.Sprintf("its failover is %s; the mirror starts once it completed", f.Phase))
	}
	return nil
}

// failbacksOf enqueues the failback mirrors that name the changed KafkaMirror in
// spec.initialPositions.fromFailover, so that a completed (or failed, retried, deleted)
// failover is seen at once.
func (r *KafkaMirrorReconciler) failbacksOf(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.KafkaMirrorList
	opts := []client.ListOption{client.InNamespace(obj.GetNamespace())}
	if r.sourceIndexed {
		opts = append(opts, client.MatchingFields{peerIndex: fromFailoverIndexValue(obj.GetName())})
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the failback mirrors", "kafkaMirror", obj.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if ip := m.Spec.InitialPositions; ip != nil && ip.FromFailover == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return out
}

// failbackRelevant lets through the KafkaMirror events a failback mirror waits for: a
// creation or deletion, a spec change, and a change of the failover's phase (a status
// write that does not move the generation).
var failbackRelevant = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.KafkaMirror)
		n, ok2 := e.ObjectNew.(*v1alpha1.KafkaMirror)
		if !ok1 || !ok2 {
			return false
		}
		return o.Generation != n.Generation || failoverPhase(o) != failoverPhase(n)
	},
	CreateFunc:  func(event.CreateEvent) bool { return true },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func failoverPhase(m *v1alpha1.KafkaMirror) v1alpha1.FailoverPhase {
	if m.Status.Failover == nil {
		return ""
	}
	return m.Status.Failover.Phase
}

// watchFailbacks is the watch SetupWithManager adds for failback mirrors.
func (r *KafkaMirrorReconciler) watchFailbacks() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(r.failbacksOf)
}

// neverMirrorTogether tells whether m and o never mirror at the same time, so that they
// cannot close a mirror loop: one fails back from the other (it starts only once the
// other's failover completed, and a failed-over mirror stays stopped), or one completed
// a failover. A failover still running may yet drain records: that one counts.
func neverMirrorTogether(m, o *v1alpha1.KafkaMirror) bool {
	failsBackFrom := func(a, b *v1alpha1.KafkaMirror) bool {
		return a.Namespace == b.Namespace && a.Spec.InitialPositions != nil && a.Spec.InitialPositions.FromFailover == b.Name
	}
	failedOver := func(a *v1alpha1.KafkaMirror) bool {
		return a.Spec.Failover != nil && failoverPhase(a) == v1alpha1.FailoverCompleted
	}
	return failsBackFrom(m, o) || failsBackFrom(o, m) || failedOver(m) || failedOver(o)
}
