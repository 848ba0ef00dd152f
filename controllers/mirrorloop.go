package controllers

import (
	"context"
	"errors"
	"fmt"

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
	var all v1alpha1.KafkaMirrorList
	if err := r.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("while listing KafkaMirrors to look for a mirror loop: %w", err)
	}
	if e := findMirrorLoop(m, cfg, all.Items); e != nil {
		return e, nil
	}
	return nil, nil
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
