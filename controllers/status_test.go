package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

func readyDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

func syncedTopics(states ...topics.TopicState) topicSyncResult {
	return topicSyncResult{report: topics.Report{Topics: states, Selected: len(states)}}
}

// TestComputeStatus: the conditions for each combination of step results, computed in
// one place.
func TestComputeStatus(t *testing.T) {
	inSync := topics.TopicState{Source: "a", Target: "a", SourcePartitions: 3, TargetPartitions: 3, Action: topics.ActionNone}
	type want struct{ ready, topicsSynced, reconciling, stalled string } // "Status/Reason"
	tests := map[string]struct {
		mirror *v1alpha1.KafkaMirror
		obs    observation
		want   want
		// message is a part of the Ready message.
		message string
	}{
		"everything ready": {
			mirror: newMirror(),
			obs:    observation{topics: syncedTopics(inSync), topicsRan: true, deployment: readyDeployment(1)},
			want:   want{"True/Available", "True/TopicsInSync", "False/Reconciled", "False/Reconciled"},
		},
		"pods not ready yet": {
			mirror:  newMirror(),
			obs:     observation{topics: syncedTopics(inSync), topicsRan: true, deployment: &appsv1.Deployment{}},
			want:    want{"False/DeploymentNotReady", "True/TopicsInSync", "True/Progressing", "False/Reconciled"},
			message: "0 of 1 mirror pods ready",
		},
		"paused": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.Paused = true }),
			obs:    observation{topics: syncedTopics(inSync), topicsRan: true, deployment: readyDeployment(0)},
			want:   want{"False/Paused", "True/TopicsInSync", "False/Reconciled", "False/Reconciled"},
		},
		"scaled to zero": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = ptr.To[int32](0) }),
			obs:    observation{topics: syncedTopics(inSync), topicsRan: true, deployment: readyDeployment(0)},
			want:   want{"False/ScaledToZero", "True/TopicsInSync", "False/Reconciled", "False/Reconciled"},
		},
		"invalid spec": {
			mirror:  newMirror(),
			obs:     observation{invalid: &specError{problems: []string{"spec.topics.include[0]: bad"}}},
			want:    want{"False/InvalidSpec", "False/InvalidSpec", "False/InvalidSpec", "True/InvalidSpec"},
			message: "spec.topics.include[0]: bad",
		},
		"source unreachable": {
			mirror:  newMirror(),
			obs:     observation{topics: topicSyncResult{err: errors.New("connection refused"), role: kafka.RoleSource}, topicsRan: true, deployment: readyDeployment(1)},
			want:    want{"False/TopicsNotSynced", "False/SourceUnreachable", "True/Progressing", "False/Reconciled"},
			message: "connection refused",
		},
		"target unreachable": {
			mirror: newMirror(),
			obs:    observation{topics: topicSyncResult{err: errors.New("timeout"), role: kafka.RoleTarget}, topicsRan: true, deployment: readyDeployment(1)},
			want:   want{"False/TopicsNotSynced", "False/TargetUnreachable", "True/Progressing", "False/Reconciled"},
		},
		"secret missing": {
			mirror:  newMirror(),
			obs:     observation{secretErr: &missingSecretError{`Secret "x" does not exist`}, deployment: readyDeployment(1)},
			want:    want{"False/SecretNotFound", "False/SecretNotFound", "True/Progressing", "False/Reconciled"},
			message: `Secret "x" does not exist`,
		},
		"secret forbidden by RBAC": {
			mirror: newMirror(),
			obs: observation{secretErr: &forbiddenSecretError{field: "spec.target.tls.caSecretRefs[1]", secret: "ca", namespace: "team-c"},
				deployment: readyDeployment(1)},
			want: want{"False/SecretForbidden", "False/SecretForbidden", "True/Progressing", "False/Reconciled"},
			message: `the operator may not read Secret "ca" in namespace "team-c" (used by spec.target.tls.caSecretRefs[1]): ` +
				`add namespace "team-c" to the chart value rbac.secretNamespaces (kustomize: a RoleBinding there to the ClusterRole kafka-mirror-secret-reader)`,
		},
		"a topic failed": {
			mirror: newMirror(),
			obs: observation{topics: syncedTopics(inSync, topics.TopicState{Source: "b", Target: "b", Action: topics.ActionFailed, Err: errors.New("policy violation")}),
				topicsRan: true, deployment: readyDeployment(1)},
			want:    want{"False/TopicsNotSynced", "False/TopicSyncFailed", "False/Reconciled", "False/Reconciled"},
			message: "1 of 2 topics could not be synced: b",
		},
		"target has more partitions": {
			mirror: newMirror(),
			obs: observation{topics: syncedTopics(inSync, topics.TopicState{Source: "b", Target: "b", SourcePartitions: 2, TargetPartitions: 4, Action: topics.ActionTargetHasMore}),
				topicsRan: true, deployment: readyDeployment(1)},
			want: want{"True/Available", "True/TargetHasMorePartitions", "False/Reconciled", "False/Reconciled"},
		},
		"sync disabled with a missing target": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.SyncPartitions = ptr.To(false) }),
			obs: observation{topics: topicSyncResult{dryRun: true, report: topics.Report{Selected: 1,
				Topics: []topics.TopicState{{Source: "a", Target: "a", SourcePartitions: 3, Action: topics.ActionCreated}}}},
				topicsRan: true, deployment: readyDeployment(1)},
			want: want{"False/TopicsNotSynced", "False/TopicSyncDisabled", "False/Reconciled", "False/Reconciled"},
		},
		"configs not synced": {
			mirror: newMirror(),
			obs: observation{topics: syncedTopics(inSync,
				topics.TopicState{Source: "b", Target: "b", Action: topics.ActionCreated,
					RefusedConfigs: []topics.RefusedConfig{{Name: "x.y", Value: "1", Err: errors.New("INVALID_CONFIG")}}},
				topics.TopicState{Source: "c", Target: "c", Action: topics.ActionNone, ConfigErr: errors.New("not authorised")}),
				topicsRan: true, deployment: readyDeployment(1)},
			want:    want{"True/Available", "True/TopicsInSync", "False/Reconciled", "False/Reconciled"},
			message: "3 topics in sync; some configs of b, c could not be synced, and the topics are mirrored without them (see status.topics.items)",
		},
		"no topics selected": {
			mirror: newMirror(),
			obs:    observation{topics: syncedTopics(), topicsRan: true, deployment: readyDeployment(1)},
			want:   want{"True/Available", "True/NoTopicsSelected", "False/Reconciled", "False/Reconciled"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := computeStatus(tc.mirror, &tc.obs)
			got := want{}
			for typ, into := range map[string]*string{
				v1alpha1.ConditionReady: &got.ready, v1alpha1.ConditionTopicsSynced: &got.topicsSynced,
				v1alpha1.ConditionReconciling: &got.reconciling, v1alpha1.ConditionStalled: &got.stalled,
			} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Fatalf("no %s condition", typ)
				}
				if c.ObservedGeneration != tc.mirror.Generation {
					t.Fatalf("%s observedGeneration %d, want %d", typ, c.ObservedGeneration, tc.mirror.Generation)
				}
				*into = string(c.Status) + "/" + c.Reason
			}
			expect(t, "conditions", got, tc.want)
			if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); !strings.Contains(ready.Message, tc.message) {
				t.Fatalf("Ready message %q does not contain %q", ready.Message, tc.message)
			}
			expect(t, "consumerGroup", st.ConsumerGroup, "kafka-mirror.shop.orders")
		})
	}
}

// TestConditionsKeepTransitionTime: recomputing the same status keeps
// lastTransitionTime, so an unchanged mirror writes no status.
func TestConditionsKeepTransitionTime(t *testing.T) {
	m := newMirror()
	obs := &observation{topics: syncedTopics(), topicsRan: true, deployment: readyDeployment(1)}
	m.Status = computeStatus(m, obs)
	for i := range m.Status.Conditions {
		m.Status.Conditions[i].LastTransitionTime = metav1.Unix(1000, 0)
	}
	again := computeStatus(m, obs)
	expect(t, "status", again, m.Status)
}

func TestTopicsStatusCapsItems(t *testing.T) {
	var states []topics.TopicState
	for i := range v1alpha1.MaxTopicStatuses + 20 {
		states = append(states, topics.TopicState{Source: strings.Repeat("t", i+1), SourcePartitions: 1, TargetPartitions: 1, Action: topics.ActionNone})
	}
	st := topicsStatus(syncedTopics(states...))
	expect(t, "items", len(st.Items), v1alpha1.MaxTopicStatuses)
	expect(t, "counts", [2]int32{st.Selected, st.InSync}, [2]int32{int32(len(states)), int32(len(states))})
}

// TestSyncErrorRole checks that a Sync error is put on the cluster its type names,
// however it is wrapped and whatever its message says.
func TestSyncErrorRole(t *testing.T) {
	tests := map[string]struct {
		err  error
		want string
	}{
		"target listing failed": {
			err:  &topics.ClusterError{Role: kafka.RoleTarget, Err: errors.New("while listing target topics: EOF")},
			want: kafka.RoleTarget,
		},
		"source listing failed": {
			err:  &topics.ClusterError{Role: kafka.RoleSource, Err: errors.New("while listing source topics: EOF")},
			want: kafka.RoleSource,
		},
		"wrapped, message naming the other cluster": {
			err:  fmt.Errorf("while syncing: %w", &topics.ClusterError{Role: kafka.RoleSource, Err: errors.New("source lost its target topic list")}),
			want: kafka.RoleSource,
		},
		"untyped error mentioning a target topic": {
			err:  errors.New("while syncing topics: context canceled (target topic orders)"),
			want: kafka.RoleSource,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := syncErrorRole(tc.err); got != tc.want {
				t.Errorf("syncErrorRole(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestTopicStatusConfigMessage: a topic whose configs were not all synced is in sync
// (it mirrors), and its message says which configs and why.
func TestTopicStatusConfigMessage(t *testing.T) {
	refused := []topics.RefusedConfig{
		{Name: "x.y", Value: "1", Err: errors.New("INVALID_CONFIG")},
		{Name: "z", Value: "{}", Err: errors.New("POLICY_VIOLATION")},
	}
	tests := map[string]struct {
		state topics.TopicState
		want  string
	}{
		"all synced": {state: topics.TopicState{Action: topics.ActionNone}},
		"refused": {
			state: topics.TopicState{Action: topics.ActionCreated, RefusedConfigs: refused},
			want:  "the target refused the source configs x.y=1 (INVALID_CONFIG), z={} (POLICY_VIOLATION); the topic is mirrored without them",
		},
		"unreadable and refused": {
			state: topics.TopicState{Action: topics.ActionNone, ConfigErr: errors.New("TOPIC_AUTHORIZATION_FAILED"), RefusedConfigs: refused[:1]},
			want: "its configs could not be synced: TOPIC_AUTHORIZATION_FAILED; the target refused the source configs x.y=1 (INVALID_CONFIG); " +
				"the topic is mirrored without them",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ts := topicsStatus(syncedTopics(tc.state))
			expect(t, "state", ts.Items[0].State, v1alpha1.TopicStateInSync)
			expect(t, "message", ts.Items[0].Message, tc.want)
			expect(t, "inSync", ts.InSync, int32(1))
		})
	}
}
