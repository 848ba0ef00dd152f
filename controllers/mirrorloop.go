package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// mirrorLoopError says that another KafkaMirror, there before this one (holdsOver),
// mirrors this one's target back into its source under the same topic names while loop
// prevention (spec.provenance) is not on in both: every record would go round between
// the two clusters.
type mirrorLoopError struct {
	// peer names the other KafkaMirror (peerName); topic is a source topic of m that
	// comes back under its own name.
	peer, topic string
}

func (e *mirrorLoopError) Error() string {
	return fmt.Sprintf("spec.provenance.enabled: Required value: %s mirrors this mirror's target back into its source under the same topic names (%q comes back as %q), so records would loop between the two clusters; set spec.provenance.enabled: true on both, or topics.rename on one",
		e.peer, e.topic, e.topic)
}

// checkMirrorLoop looks for a KafkaMirror (in any namespace) that was there before m
// and closes a loop with it (findMirrorLoop). A failed list is no spec error: it is
// returned as err.
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

// loopCandidates lists the KafkaMirrors that may close a loop with cfg: only one whose
// source is cfg's target can (topics.LoopTopic).
func (r *KafkaMirrorReconciler) loopCandidates(ctx context.Context, cfg *config.Config) ([]v1alpha1.KafkaMirror, error) {
	values := make([]string, 0, len(cfg.Target.BootstrapServers))
	for _, s := range cfg.Target.BootstrapServers {
		values = append(values, strings.ToLower(s))
	}
	return r.listPeers(ctx, "a mirror loop", values)
}

// findMirrorLoop returns a *mirrorLoopError when one of others that holds over m
// (holdsOver: m is the newcomer) mirrors m's target back into m's source and some topic
// comes back under the name it left with, unless both have spec.provenance.enabled
// (then the engines drop the records that come back), or the two never mirror at the
// same time (neverMirrorTogether: a failed-over mirror and its failback). topics.LoopTopic decides it on
// the include and exclude expressions themselves, and on the topics of both mirrors'
// status (what their topic syncs found).
func findMirrorLoop(m *v1alpha1.KafkaMirror, cfg *config.Config, others []v1alpha1.KafkaMirror) *mirrorLoopError {
	for i := range others {
		o := &others[i]
		if (o.Namespace == m.Namespace && o.Name == m.Name) || neverMirrorTogether(m, o) || !holdsOver(o, m) {
			continue
		}
		if t, ok := topics.LoopTopic(cfg, RenderConfig(o), statusTopics(m, o)...); ok {
			return &mirrorLoopError{peer: peerName(m, o), topic: t}
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
