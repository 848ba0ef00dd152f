package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// KafkaMirrors of different tenants share the operator and the Kafka clusters. Two of
// them that cannot both run (a mirror loop, one consumer group) are a conflict between
// a mirror that was there first and a newcomer: only the newcomer is refused, so that
// nobody can stall a running mirror by creating another, and a refused mirror's status
// never names an object in a namespace its reader may not see.

// peerIndex indexes KafkaMirrors by the values a conflict check looks them up by: each
// source bootstrap server (lower case, as config.Cluster.SameClusterAs compares them)
// for the loop check, the consumer group (groupIndexValue) for the group check, and
// the KafkaMirror a failback mirror fails back from (fromFailoverIndexValue) for the
// watch that wakes it when that one's failover completes.
const peerIndex = sourceServerIndex

// sourceServerIndex is the name of peerIndex in the manager's cache (SetupWithManager).
const sourceServerIndex = "spec.source.bootstrapServers"

// groupIndexPrefix marks a consumer group among peerIndex's values: a bootstrap server
// (host:port) never contains a space.
const groupIndexPrefix = "consumerGroup "

// groupIndexValue is m's consumer group as a peerIndex value.
func groupIndexValue(group string) string { return groupIndexPrefix + group }

// sourceServers are the values of peerIndex for m: its source bootstrap servers, its
// consumer group and the KafkaMirror it fails back from.
func sourceServers(m *v1alpha1.KafkaMirror) []string {
	out := make([]string, 0, len(m.Spec.Source.BootstrapServers)+2)
	for _, s := range m.Spec.Source.BootstrapServers {
		out = append(out, strings.ToLower(s))
	}
	out = append(out, groupIndexValue(ConsumerGroup(m)))
	if ip := m.Spec.InitialPositions; ip != nil {
		out = append(out, fromFailoverIndexValue(ip.FromFailover))
	}
	return out
}

// listPeers lists the KafkaMirrors with any of values in peerIndex, each once. Under
// the manager they are looked up in the cache's index, so a reconcile does not copy
// every KafkaMirror of the cluster (at 1,000 KafkaMirrors that copy was a third of the
// operator's CPU while they were created); without the index (a reconciler built on a
// plain client) all are listed, and the checks filter them.
func (r *KafkaMirrorReconciler) listPeers(ctx context.Context, what string, values []string) ([]v1alpha1.KafkaMirror, error) {
	if !r.sourceIndexed {
		var all v1alpha1.KafkaMirrorList
		if err := r.List(ctx, &all); err != nil {
			return nil, fmt.Errorf("while listing KafkaMirrors to look for %s: %w", what, err)
		}
		return all.Items, nil
	}
	var out []v1alpha1.KafkaMirror
	seen := map[string]bool{}
	for _, v := range values {
		var list v1alpha1.KafkaMirrorList
		if err := r.List(ctx, &list, client.MatchingFields{peerIndex: v}); err != nil {
			return nil, fmt.Errorf("while listing KafkaMirrors to look for %s: %w", what, err)
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

// holdsOver tells whether o was there before m, so that m, not o, is refused when the
// two conflict. In order:
//   - one of them already stands refused by a conflict with another KafkaMirror: the
//     other holds (a refusal is kept, so nothing flaps between the two);
//   - one of them passed its checks at its current generation and the other did not:
//     the one that passed holds (a new mirror, or a spec change that makes a running
//     mirror conflict with another, is the newcomer);
//   - the one created first holds; the UID breaks a tie within the same second.
//
// It is a strict order on any two distinct KafkaMirrors: both sides of a conflict
// agree on which one is refused.
func holdsOver(o, m *v1alpha1.KafkaMirror) bool {
	if ro, rm := refusedByPeer(o), refusedByPeer(m); ro != rm {
		return rm
	}
	if ao, am := acceptedAsIs(o), acceptedAsIs(m); ao != am {
		return ao
	}
	if to, tm := o.CreationTimestamp, m.CreationTimestamp; !to.Equal(&tm) {
		return to.Before(&tm)
	}
	return o.UID < m.UID
}

// refusedByPeer tells whether m's status says it is refused for a conflict with another
// KafkaMirror.
func refusedByPeer(m *v1alpha1.KafkaMirror) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == v1alpha1.ReasonMirrorLoop || c.Reason == v1alpha1.ReasonConsumerGroupInUse)
}

// acceptedAsIs tells whether m's status says its current generation passed every spec
// check.
func acceptedAsIs(m *v1alpha1.KafkaMirror) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == m.Generation
}

// peerName names o to a reader of m's status: by name in m's namespace; as "another
// KafkaMirror in the cluster" elsewhere, as m's reader may not be allowed to see
// that namespace.
func peerName(m, o *v1alpha1.KafkaMirror) string {
	if o.Namespace == m.Namespace {
		return "KafkaMirror " + o.Name
	}
	return "another KafkaMirror in the cluster"
}

// consumerGroupInUseError says that a KafkaMirror that holds over this one uses the same
// consumer group on the same source cluster, or into the same target cluster.
type consumerGroupInUseError struct {
	// peer names the other KafkaMirror (peerName); group is the shared group; role is
	// the shared cluster (kafka.RoleSource or kafka.RoleTarget).
	peer, group, role string
}

func (e *consumerGroupInUseError) Error() string {
	var shared string
	if e.role == kafka.RoleSource {
		shared = "on the same source cluster: the two would split the source partitions between them and commit each other's offsets, so records read by one never reach the other's target"
	} else {
		shared = "into the same target cluster: the two would share the progress group " + fmt.Sprintf("%q", e.group+".source-offsets") +
			", the offset-sync topic and the exactly-once transactional ids, and overwrite each other's progress"
	}
	return fmt.Sprintf("spec.consumerGroup: Invalid value: %q: %s already uses this consumer group %s; a consumer group belongs to one KafkaMirror per cluster: "+
		"re-create this KafkaMirror with a spec.consumerGroup of its own (the field is immutable)", e.group, e.peer, shared)
}

// checkConsumerGroup refuses m when a KafkaMirror that holds over it (holdsOver) uses
// m's consumer group on m's source cluster or into m's target cluster. A failed list
// is no spec error: it is returned as err.
func (r *KafkaMirrorReconciler) checkConsumerGroup(ctx context.Context, m *v1alpha1.KafkaMirror, cfg *config.Config) (error, error) {
	others, err := r.listPeers(ctx, "a shared consumer group", []string{groupIndexValue(cfg.ConsumerGroup)})
	if err != nil {
		return nil, err
	}
	for i := range others {
		o := &others[i]
		if o.UID == m.UID || (o.Namespace == m.Namespace && o.Name == m.Name) || !holdsOver(o, m) {
			continue
		}
		if role := config.SharedGroup(cfg, RenderConfig(o)); role != "" {
			return &consumerGroupInUseError{peer: peerName(m, o), group: cfg.ConsumerGroup, role: role}, nil
		}
	}
	return nil, nil
}
