package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// DefaultSecretPollInterval is how often the operator looks whether a referenced Secret
// changed, when ManagerOptions.SecretPollInterval is zero.
const DefaultSecretPollInterval = 30 * time.Second

// secretPollTimeout bounds one Secret read of the poller, so a slow API server delays
// one round, never stops the poller.
const secretPollTimeout = 10 * time.Second

// secretPoller notices a change to a Secret that a KafkaMirror references (created,
// rotated, deleted, or newly readable) and enqueues the KafkaMirrors that use it, whose
// reconcile reads it again and rolls the pods when a referenced key changed.
//
// It needs only `get` on Secrets: watching them would need list and watch, which RBAC
// grants on every Secret of a namespace (or the cluster), those no KafkaMirror names
// included. Each round reads only the metadata of the Secrets that the cached
// KafkaMirrors reference, one GET per Secret however many KafkaMirrors share it, and
// keeps nothing but their resourceVersions. It runs on the leader only.
type secretPoller struct {
	mirrors client.Reader // the manager's cache: KafkaMirrors
	secrets client.Reader // uncached: Secret metadata by name
	every   time.Duration
	changed chan<- event.GenericEvent
	log     logr.Logger
}

// NeedLeaderElection keeps the poller to the leader, the one replica that reconciles.
func (p *secretPoller) NeedLeaderElection() bool { return true }

// Start polls every p.every until ctx ends.
func (p *secretPoller) Start(ctx context.Context) error {
	seen := map[types.NamespacedName]string{}
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		p.poll(ctx, seen)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// poll reads the version of every referenced Secret once and enqueues the users of
// each whose version differs from seen (or is seen for the first time: a reconcile
// may have read the Secret just before it changed). Secrets no longer referenced are
// forgotten.
func (p *secretPoller) poll(ctx context.Context, seen map[types.NamespacedName]string) {
	var list v1alpha1.KafkaMirrorList
	// Read only, and only names are kept: no copy of every KafkaMirror each round.
	if err := p.mirrors.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		p.log.Error(err, "Failed to list the KafkaMirrors whose Secrets are polled")
		return
	}
	users := map[types.NamespacedName][]*v1alpha1.KafkaMirror{}
	for i := range list.Items {
		m := &list.Items[i]
		for _, name := range secretNames(m) {
			key := types.NamespacedName{Namespace: m.Namespace, Name: name}
			users[key] = append(users[key], m)
		}
	}
	for key := range seen {
		if _, ok := users[key]; !ok {
			delete(seen, key)
		}
	}
	for key, ms := range users {
		version, err := p.version(ctx, key)
		if err != nil {
			// Transient: the next round tries again; the reconcile reports what it finds.
			p.log.V(1).Info("Failed to read a Secret's metadata", "secret", key, "error", err.Error())
			continue
		}
		if old, ok := seen[key]; ok && old == version {
			continue
		}
		seen[key] = version
		for _, m := range ms {
			select {
			case p.changed <- event.GenericEvent{Object: m}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// version names the state of the Secret at key: its resourceVersion, or that it is
// absent or not readable by the operator (both may change without the KafkaMirror
// changing: the Secret is created, or RBAC is granted).
func (p *secretPoller) version(ctx context.Context, key types.NamespacedName) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, secretPollTimeout)
	defer cancel()
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	switch err := p.secrets.Get(ctx, key, s); {
	case apierrors.IsNotFound(err):
		return "absent", nil
	case apierrors.IsForbidden(err):
		return "forbidden", nil
	case err != nil:
		return "", fmt.Errorf("while reading the metadata of Secret %s: %w", key, err)
	}
	return "version " + s.ResourceVersion, nil
}
