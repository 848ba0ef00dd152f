//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
)

// The autoscaling scenario's numbers. Each engine is held to a few hundred records a
// second whatever the machine: its byte budget for records in flight is small and every
// produce answer from the target comes back ackLatency late, so one pod drains about
// maxInFlightBytes / ackLatency. The producer writes several times that.
const (
	autoscaleNamespace     = "e2e-autoscale"
	autoscaleTopic         = "auto.orders"
	autoscalePartitions    = 8
	autoscaleRecords       = 6_000
	autoscaleRate          = 600 // records/s
	autoscaleAckLatency    = 100 // ms, on every answer of the target
	autoscaleInFlightBytes = 16 << 10
	autoscaleMax           = 4
	autoscaleTargetCatchUp = 20 * time.Second
	autoscaleDownWindow    = 10 * time.Second
	autoscaleSyncInterval  = 2 * time.Second
)

// TestAutoscaleOnLag (issue 17): the operator (envtest) autoscales a mirror whose pods
// are engine processes. A backlog grows because the producer is faster than one pod,
// the operator raises the replicas, the lag is worked off within the catch-up target
// (3x, for a busy machine), and once the producer stopped the replicas fall back to
// minReplicas after the scale-down window. Every hand-over drains (rebalance on scale
// up, SIGTERM on scale down), so the audit shows 0 lost and 0 duplicates.
func TestAutoscaleOnLag(t *testing.T) {
	s := newScenario(t, map[string]int32{autoscaleTopic: autoscalePartitions})
	s.dst.addToxic(t, "ack-latency", "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, autoscaleAckLatency))
	op := startOperator(t, s.dir, autoscaleNamespace)
	ctx := context.Background()

	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: autoscaleNamespace, Name: "orders"},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source:               v1alpha1.ClusterSpec{BootstrapServers: s.src.addrs()},
			Target:               v1alpha1.ClusterSpec{BootstrapServers: s.dst.addrs()},
			ConsumerGroup:        s.group,
			Topics:               v1alpha1.TopicsSpec{Include: []string{`auto\..*`}},
			Streams:              1,
			OffsetCommitInterval: &metav1.Duration{Duration: commitInterval},
			TopicSyncInterval:    &metav1.Duration{Duration: autoscaleSyncInterval},
			MaxInFlightBytes:     autoscaleInFlightBytes,
			Autoscaling: &v1alpha1.AutoscalingSpec{
				MinReplicas:            ptr.To[int32](1),
				MaxReplicas:            autoscaleMax,
				TargetCatchUp:          &metav1.Duration{Duration: autoscaleTargetCatchUp},
				ScaleUpStabilization:   &metav1.Duration{},
				ScaleDownStabilization: &metav1.Duration{Duration: autoscaleDownWindow},
			},
		},
	}
	if err := op.c.Create(ctx, m); err != nil {
		t.Fatalf("creating the KafkaMirror: %v", err)
	}
	key := client.ObjectKeyFromObject(m)
	k := s.startKubelet(op.c, types.NamespacedName{Namespace: m.Namespace, Name: m.Name + "-mirror"})

	// One pod, mirroring.
	ready := waitMirror(t, op, key, time.Minute, "Ready with 1 pod", func(m *v1alpha1.KafkaMirror) bool {
		c := findCondition(m, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && m.Status.ReadyReplicas == 1
	})
	t.Logf("ready with 1 pod: %s", ready.Status.Autoscaling.Message)

	w := audit.Workload{Topics: s.topics, Records: autoscaleRecords, Rate: autoscaleRate, ValueSize: 100, Seed: time.Now().UnixNano()}
	bg := s.produce(w)

	// The backlog raises the replicas.
	up := waitMirror(t, op, key, time.Minute, "a scale up", func(m *v1alpha1.KafkaMirror) bool {
		return m.Status.Autoscaling != nil && m.Status.Autoscaling.DesiredReplicas > 1
	})
	upAt := time.Now()
	t.Logf("scaled up: %s", up.Status.Autoscaling.Message)

	// The lag is worked off within the catch-up target (3x: the producer may still be
	// writing, and the machine is shared).
	caughtUp := waitMirror(t, op, key, 3*autoscaleTargetCatchUp, "lag 0 after the scale up", func(m *v1alpha1.KafkaMirror) bool {
		return isDone(bg.Done()) && m.Status.Autoscaling != nil && m.Status.Autoscaling.Lag != nil && *m.Status.Autoscaling.Lag == 0
	})
	catchUp := time.Since(upAt)
	_, peak := k.running()
	t.Logf("caught up %v after the first scale up, peak %d pods: %s", catchUp.Round(100*time.Millisecond), peak, caughtUp.Status.Autoscaling.Message)
	p := bg.Wait(t)

	// Idle: back to minReplicas after the scale-down window.
	down := waitMirror(t, op, key, autoscaleDownWindow+time.Minute, "a scale down to 1 pod", func(m *v1alpha1.KafkaMirror) bool {
		return m.Status.Autoscaling != nil && m.Status.Autoscaling.DesiredReplicas == 1 && m.Status.ReadyReplicas == 1
	})
	downAfter := time.Since(upAt)
	t.Logf("scaled down: %s", down.Status.Autoscaling.Message)
	if gap := down.Status.Autoscaling.LastScaleTime.Sub(up.Status.Autoscaling.LastScaleTime.Time); gap < autoscaleDownWindow-time.Second {
		t.Errorf("scaled down %v after scaling up, before the scale-down window of %v", gap, autoscaleDownWindow)
	}
	if n, _ := k.running(); n != 1 {
		t.Errorf("%d engines run after the scale down, want 1", n)
	}

	_, rep := s.waitComplete(p, audit.Options{})
	s.assertAudit(rep, 0)
	if peak < 2 {
		t.Errorf("at most %d pods ran, want a scale up", peak)
	}

	// Each decision is an event with the numbers.
	var evs eventsv1.EventList
	if err := op.c.List(ctx, &evs, client.InNamespace(autoscaleNamespace)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range evs.Items {
		if e.Regarding.Name == m.Name && (e.Reason == v1alpha1.ReasonScaledUp || e.Reason == v1alpha1.ReasonScaledDown) {
			seen[e.Reason] = e.Note
		}
	}
	for _, reason := range []string{v1alpha1.ReasonScaledUp, v1alpha1.ReasonScaledDown} {
		if note, ok := seen[reason]; !ok {
			t.Errorf("no %s event", reason)
		} else if !strings.Contains(note, "lag") || !strings.Contains(note, "/s per replica") {
			t.Errorf("the %s event does not give the numbers: %q", reason, note)
		}
	}
	k.stop()
	k.mu.Lock()
	t.Logf("engine stops: %s", strings.Join(k.stops, "; "))
	k.mu.Unlock()
	s.figures(rep, map[string]any{
		"peak_pods":          peak,
		"catch_up_seconds":   catchUp.Round(100 * time.Millisecond).Seconds(),
		"scale_down_seconds": downAfter.Round(100 * time.Millisecond).Seconds(),
	})
}

// waitMirror polls the KafkaMirror until ok holds, failing the test after timeout with
// its last status.
func waitMirror(t *testing.T, op *operator, key types.NamespacedName, timeout time.Duration, what string, ok func(*v1alpha1.KafkaMirror) bool) *v1alpha1.KafkaMirror {
	t.Helper()
	deadline := time.Now().Add(timeout)
	m := &v1alpha1.KafkaMirror{}
	for {
		err := op.c.Get(context.Background(), key, m)
		if err == nil && ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			as := "none"
			if m.Status.Autoscaling != nil {
				as = m.Status.Autoscaling.Reason + ": " + m.Status.Autoscaling.Message
			}
			t.Fatalf("no %s within %v (err %v); ready pods %d, autoscaling %s, conditions %+v", what, timeout, err, m.Status.ReadyReplicas, as, m.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func findCondition(m *v1alpha1.KafkaMirror, typ string) *metav1.Condition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == typ {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
