package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// TestAutoscaleDecide: the replica count the autoscaler asks for after a series of lag
// samples, each decided on like a reconcile does (the decision becomes the current
// count of the next sample).
func TestAutoscaleDecide(t *testing.T) {
	base := autoscaleParams{min: 1, max: 10, targetCatchUp: time.Minute, downWindow: 30 * time.Second,
		streams: 1, commitInterval: time.Second}
	// sample is one lag sample sec seconds in, with ready pods, the Deployment steady.
	sample := func(sec int, end, lag int64, ready int32) observedSample {
		return observedSample{lagSample: lagSample{at: time.Unix(int64(sec), 0), end: end, lag: lag, partitions: 64}, ready: ready, steady: true}
	}
	// backlog grows: 1000 records/s arrive, one pod drains 500/s.
	backlog := []observedSample{sample(0, 0, 10_000, 1), sample(10, 10_000, 15_000, 1)}
	tests := map[string]struct {
		params  func(*autoscaleParams)
		current int32
		samples []observedSample
		want    int32
		reason  string
		// message holds these parts of status.autoscaling.message.
		message []string
	}{
		"one sample decides nothing": {
			current: 2, samples: backlog[:1],
			want: 2, reason: v1alpha1.ReasonNoMeasuredRate,
		},
		"a backlog scales up at once": {
			// (1000/s + 15000/60s) / 500/s = 2.5 pods
			current: 1, samples: backlog,
			want: 3, reason: v1alpha1.ReasonScaledUp,
			message: []string{"from 1 to 3 replicas", "lag 15000 records", "inflow 1000/s", "drain 500/s per replica (measured under backlog)"},
		},
		"never more pods than the partitions keep busy": {
			params:  func(p *autoscaleParams) { p.streams = 2 },
			current: 1, samples: []observedSample{withPartitions(backlog[0], 4), withPartitions(backlog[1], 4)},
			want: 2, reason: v1alpha1.ReasonScaledUp,
			message: []string{"limited to 2 by 4 partitions at 2 streams per pod"},
		},
		"never more than maxReplicas": {
			params:  func(p *autoscaleParams) { p.max = 2 },
			current: 1, samples: backlog,
			want: 2, reason: v1alpha1.ReasonScaledUp, message: []string{"limited to maxReplicas 2"},
		},
		"never fewer than minReplicas": {
			params:  func(p *autoscaleParams) { p.min, p.downWindow = 3, 0 },
			current: 4, samples: []observedSample{sample(0, 0, 0, 4), sample(10, 0, 0, 4)},
			want: 3, reason: v1alpha1.ReasonScaledDown,
		},
		"a mirror that keeps up holds its count: the rate without a backlog is a lower bound": {
			// 1000/s arrive and 1000/s drain on 2 pods; the lag is what commits trail by.
			current: 2, samples: []observedSample{sample(0, 0, 500, 2), sample(10, 10_000, 520, 2)},
			want: 2, reason: v1alpha1.ReasonSteady, message: []string{"a lower bound, measured without a backlog"},
		},
		"a scale down waits for the down window, then goes to the highest recommendation in it": {
			current: 3,
			samples: []observedSample{sample(0, 0, 0, 3), sample(10, 0, 0, 3), sample(20, 0, 0, 3), sample(30, 0, 0, 3), sample(41, 0, 0, 3)},
			want:    1, reason: v1alpha1.ReasonScaledDown, message: []string{"from 3 to 1 replica:"},
		},
		"inside the down window the count holds": {
			current: 3,
			samples: []observedSample{sample(0, 0, 0, 3), sample(10, 0, 0, 3), sample(20, 0, 0, 3)},
			want:    3, reason: v1alpha1.ReasonStabilizing, message: []string{"held at 3 for scaleDownStabilization 30s"},
		},
		"a scale up waits for the up window": {
			params:  func(p *autoscaleParams) { p.upWindow = 15 * time.Second },
			current: 1, samples: backlog,
			want: 1, reason: v1alpha1.ReasonStabilizing, message: []string{"held at 1 for scaleUpStabilization 15s"},
		},
		"after the up window the lowest recommendation in it wins": {
			params:  func(p *autoscaleParams) { p.upWindow = 15 * time.Second },
			current: 1, samples: []observedSample{backlog[0], backlog[1], sample(20, 20_000, 20_000, 1)},
			want: 3, reason: v1alpha1.ReasonScaledUp,
		},
		"no pod ready: no rate, nothing decided": {
			current: 2, samples: []observedSample{sample(0, 0, 10_000, 0), sample(10, 10_000, 20_000, 0)},
			want: 2, reason: v1alpha1.ReasonNoMeasuredRate, message: []string{"no drain rate measured yet"},
		},
		"an idle mirror goes to minReplicas without a rate": {
			params:  func(p *autoscaleParams) { p.downWindow = 0 },
			current: 2, samples: []observedSample{unsteady(sample(0, 100, 0, 1)), unsteady(sample(10, 100, 0, 1))},
			want: 1, reason: v1alpha1.ReasonScaledDown,
		},
		"during a rollout the rate is not measured and the known capacity decides": {
			// Measured 500/s per pod under backlog, then a sample while a pod starts
			// that drained little: the capacity stays 500/s.
			current: 1, samples: []observedSample{backlog[0], backlog[1], unsteady(sample(20, 20_000, 24_000, 2))},
			want: 3, reason: v1alpha1.ReasonSteady, message: []string{"drain 500/s per replica"},
		},
		"an interval slowed by a rebalance does not shrink the capacity": {
			current: 3, samples: []observedSample{sample(0, 0, 20_000, 3), sample(10, 10_000, 15_000, 3), sample(20, 20_000, 19_000, 3)},
			// first interval: 1500/s over 3 pods = 500/s; second: 600/s over 3 = 200/s.
			want: 3, reason: v1alpha1.ReasonSteady, message: []string{"drain 500/s per replica"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := base
			if tc.params != nil {
				tc.params(&p)
			}
			st := &autoscaleState{}
			current := tc.current
			var d autoscaleDecision
			for _, s := range tc.samples {
				d = st.decide(p, s, current)
				current = d.desired
			}
			if d.desired != tc.want || d.reason != tc.reason {
				t.Fatalf("decided %d (%s: %s), want %d (%s)", d.desired, d.reason, d.message, tc.want, tc.reason)
			}
			for _, part := range tc.message {
				if !strings.Contains(d.message, part) {
					t.Errorf("message %q does not say %q", d.message, part)
				}
			}
		})
	}
}

func withPartitions(s observedSample, n int32) observedSample { s.partitions = n; return s }
func unsteady(s observedSample) observedSample                { s.steady = false; return s }

// TestAutoscaledReplicas: with spec.autoscaling the Deployment follows the decision in
// status.autoscaling, within [minReplicas, maxReplicas]; spec.replicas only seeds it;
// paused wins.
func TestAutoscaledReplicas(t *testing.T) {
	autoscaled := func(desired int32, mut ...func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
		return newMirror(append([]func(*v1alpha1.KafkaMirror){func(m *v1alpha1.KafkaMirror) {
			m.Spec.Replicas = ptr.To[int32](5)
			m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 8}
			if desired > 0 {
				m.Status.Autoscaling = &v1alpha1.AutoscalingStatus{DesiredReplicas: desired}
			}
		}}, mut...)...)
	}
	tests := map[string]struct {
		mirror *v1alpha1.KafkaMirror
		want   int32
	}{
		"before the first decision spec.replicas seeds it": {autoscaled(0), 5},
		"the decision":                             {autoscaled(7), 7},
		"clamped to maxReplicas":                   {autoscaled(12), 8},
		"clamped to minReplicas":                   {autoscaled(1), 2},
		"paused wins":                              {autoscaled(7, func(m *v1alpha1.KafkaMirror) { m.Spec.Paused = true }), 0},
		"spec.replicas 0 is raised to minReplicas": {autoscaled(0, func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = ptr.To[int32](0) }), 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			expect(t, "desiredReplicas", desiredReplicas(tc.mirror), tc.want)
			expect(t, "Deployment replicas", *mirrorDeployment(tc.mirror, testImage, "h").Spec.Replicas, tc.want)
		})
	}
	m := autoscaled(3)
	live := withAutoscaling(m, &v1alpha1.AutoscalingStatus{DesiredReplicas: 6, LastScaleTime: &metav1.Time{}})
	expect(t, "replicas with this reconcile's decision", desiredReplicas(live), int32(6))
	expect(t, "m's own status is left alone", m.Status.Autoscaling.DesiredReplicas, int32(3))
}

// TestAutoscaleStep: the step decides only on a new lag sample, sets obs.scaled once per
// change, and a reconcile that reads the KafkaMirror from a cache that has not seen the
// last status patch yet keeps the last decision instead of undoing it.
func TestAutoscaleStep(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 8, TargetCatchUp: &metav1.Duration{Duration: time.Minute}}
	})
	d := readyDeployment(1)
	d.Namespace, d.Name, d.Spec.Replicas = m.Namespace, deploymentName(m), ptr.To[int32](1)
	r := &KafkaMirrorReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(d).Build()}
	step := func(m *v1alpha1.KafkaMirror, s *lagSample) (*v1alpha1.AutoscalingStatus, bool) {
		t.Helper()
		obs := &observation{topicsRan: true, topics: topicSyncResult{sample: s}}
		as, err := r.autoscale(context.Background(), m, obs)
		if err != nil {
			t.Fatal(err)
		}
		return as, obs.scaled
	}
	first := &lagSample{at: time.Unix(0, 0), end: 0, lag: 10_000, partitions: 8}
	second := &lagSample{at: time.Unix(10, 0), end: 10_000, lag: 15_000, partitions: 8}

	as, scaled := step(m, first)
	expect(t, "first sample", []any{as.DesiredReplicas, as.Reason, scaled}, []any{int32(1), v1alpha1.ReasonNoMeasuredRate, false})
	as, scaled = step(m, second)
	expect(t, "backlog", []any{as.DesiredReplicas, as.Reason, scaled}, []any{int32(3), v1alpha1.ReasonScaledUp, true})
	expect(t, "measured rates", []any{*as.Lag, *as.InflowPerSecond, *as.DrainPerSecondPerReplica}, []any{int64(15_000), int64(1000), int64(500)})
	expect(t, "lastScaleTime", as.LastScaleTime.Time.Equal(second.at), true)

	// The same sample again, with m as a stale cache still shows it (no status yet).
	as, scaled = step(m, second)
	expect(t, "no new sample, stale status", []any{as.DesiredReplicas, as.Reason, scaled}, []any{int32(3), v1alpha1.ReasonScaledUp, false})
	expect(t, "Deployment replicas built from it", desiredReplicas(withAutoscaling(m, as)), int32(3))

	// Paused wins and keeps the decision for the resume.
	paused := m.DeepCopy()
	paused.Spec.Paused = true
	paused.Status.Autoscaling = as
	as, _ = step(paused, nil)
	expect(t, "paused", []any{as.DesiredReplicas, as.Reason, desiredReplicas(withAutoscaling(paused, as))}, []any{int32(3), v1alpha1.ReasonPaused, int32(0)})
}

// TestComputeStatusAutoscaling: status.autoscaling is this reconcile's decision, and
// Ready counts the pods that decision asks for, not the ones the status read before.
func TestComputeStatusAutoscaling(t *testing.T) {
	inSync := topics.TopicState{Source: "a", Target: "a", SourcePartitions: 8, TargetPartitions: 8, Action: topics.ActionNone}
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 8}
		m.Status.Autoscaling = &v1alpha1.AutoscalingStatus{DesiredReplicas: 1}
	})
	decision := &v1alpha1.AutoscalingStatus{DesiredReplicas: 3, Reason: v1alpha1.ReasonScaledUp}
	tests := map[string]struct {
		deployment *appsv1.Deployment
		ready      string
	}{
		"the new pods are not ready yet": {readyDeployment(1), "False/DeploymentNotReady: 1 of 3 mirror pods ready"},
		"all ready":                      {readyDeployment(3), "True/Available: 3 of 3 mirror pods ready"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obs := &observation{topics: syncedTopics(inSync), topicsRan: true, deployment: tc.deployment, autoscaling: decision}
			st := computeStatus(m, obs)
			expect(t, "status.autoscaling", st.Autoscaling, decision)
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			if got := fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message); !strings.HasPrefix(got, tc.ready) {
				t.Fatalf("Ready = %s, want %s", got, tc.ready)
			}
		})
	}
	off := m.DeepCopy()
	off.Spec.Autoscaling = nil
	expect(t, "status.autoscaling without spec.autoscaling", computeStatus(off, &observation{}).Autoscaling, (*v1alpha1.AutoscalingStatus)(nil))
}
