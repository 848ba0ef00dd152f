package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// mirrorLoopError says that another KafkaMirror mirrors m's target back into m's source
// under the same topic names while loop prevention (spec.provenance) is not on in both:
// every record would go round between the two clusters.
type mirrorLoopError struct {
	// peer is the other KafkaMirror (namespace/name); topic a source topic of m that
	// comes back under its own name.
	peer, topic string
}

func (e *mirrorLoopError) Error() string {
	return fmt.Sprintf("spec.provenance.enabled: Required value: KafkaMirror %s mirrors this mirror's target back into its source under the same topic names (%q comes back as %q), so records would loop between the two clusters; set spec.provenance.enabled: true on both, or topics.rename on one",
		e.peer, e.topic, e.topic)
}

// checkMirrorLoop looks for a KafkaMirror (in any namespace) that closes a loop with m
// (findMirrorLoop). A failed list is no spec error: it is returned as err.
func (r *KafkaMirrorReconciler) checkMirrorLoop(ctx context.Context, m *v1alpha1.KafkaMirror, cfg *config.Config) (loop, err error) {
	others, err := r.loopCandidates(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if e := findMirrorLoop(m, cfg, others); e != nil {
		return e, nil
	}
	return nil, nil
}

// sourceServerIndex indexes KafkaMirrors by their source bootstrap servers (lower
// case, as config.Cluster.SameClusterAs compares them).
const sourceServerIndex = "spec.source.bootstrapServers"

// sourceServers are the index values of sourceServerIndex for m.
func sourceServers(m *v1alpha1.KafkaMirror) []string {
	out := make([]string, 0, len(m.Spec.Source.BootstrapServers))
	for _, s := range m.Spec.Source.BootstrapServers {
		out = append(out, strings.ToLower(s))
	}
	return out
}

// loopCandidates lists the KafkaMirrors that may close a loop with cfg: only one whose
// source is cfg's target can (topics.LoopTopic). Under the manager they are looked up
// in the cache's sourceServerIndex, so a reconcile does not copy every KafkaMirror of
// the cluster (at 1,000 KafkaMirrors that copy was a third of the operator's CPU while
// they were created); without the index (a reconciler built on a plain client) all
// are listed.
func (r *KafkaMirrorReconciler) loopCandidates(ctx context.Context, cfg *config.Config) ([]v1alpha1.KafkaMirror, error) {
	if !r.sourceIndexed {
		var all v1alpha1.KafkaMirrorList
		if err := r.List(ctx, &all); err != nil {
			return nil, fmt.Errorf("while listing KafkaMirrors to look for a mirror loop: %w", err)
		}
		return all.Items, nil
	}
	var out []v1alpha1.KafkaMirror
	seen := map[string]bool{}
	for _, s := range cfg.Target.BootstrapServers {
		var list v1alpha1.KafkaMirrorList
		if err := r.List(ctx, &list, client.MatchingFields{sourceServerIndex: strings.ToLower(s)}); err != nil {
			return nil, fmt.Errorf("while listing KafkaMirrors to look for a mirror loop: %w", err)
		}
		for _, o := range list.Items {
			if key := o.Namespace + "/" + o.Name; !seen[key] {
				seen[key] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// findMirrorLoop returns a *mirrorLoopError when one of others mirrors m's target back
// into m's source and some topic comes back under the name it left with, unless both
// have spec.provenance.enabled (then the engines drop the records that come back). The
// topics tried are those of both mirrors' status (what their topic syncs found) and the
// include patterns that are plain names (topics.LoopTopic): two mirrors whose regular
// expressions overlap only on topics neither has seen yet are caught once the topic
// sync lists one.
func findMirrorLoop(m *v1alpha1.KafkaMirror, cfg *config.Config, others []v1alpha1.KafkaMirror) *mirrorLoopError {
	for i := range others {
		o := &others[i]
		if o.Namespace == m.Namespace && o.Name == m.Name {
			continue
		}
		if t, ok := topics.LoopTopic(cfg, RenderConfig(o), statusTopics(m, o)...); ok {
			return &mirrorLoopError{peer: o.Namespace + "/" + o.Name, topic: t}
		}
	}
	return nil
}

// statusTopics lists the source topics of m and the target topics of o that their
// statuses show.
func statusTopics(m, o *v1alpha1.KafkaMirror) []string {
	var names []string
	if ts := m.Status.Topics; ts != nil {
		for _, it := range ts.Items {
			names = append(names, it.Source)
		}
	}
	if ts := o.Status.Topics; ts != nil {
		for _, it := range ts.Items {
			names = append(names, it.Target)
		}
	}
	return names
}

// isMirrorLoop reports whether err is a *mirrorLoopError.
func isMirrorLoop(err error) bool {
	var loop *mirrorLoopError
	return errors.As(err, &loop)
}
