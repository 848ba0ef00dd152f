package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// failbackFrom makes m the failback of the KafkaMirror named: it mirrors env.target
// back into env.source, with provenance, starting from that mirror's failover.
func failbackFrom(named string) func(*v1alpha1.KafkaMirror) {
	return func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.BootstrapServers, m.Spec.Target.BootstrapServers = env.target.ListenAddrs(), env.source.ListenAddrs()
		m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true}
		m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: named}
	}
}

// completeFailover declares a planned failover on ns/name and plays its Job to the
// end, completed or failed.
func completeFailover(t *testing.T, ns, name string, failed bool) {
	t.Helper()
	declareFailover(t, ns, name, v1alpha1.FailoverSpec{Mode: "planned"})
	job := waitFailoverJob(t, ns, name, "")
	report := &mirror.FailoverReport{Mode: mirror.FailoverPlanned, Mirror: name, Completed: !failed, SourceReachable: true}
	if failed {
		report.Error = "the source grew past the timeout"
	}
	_, summary := report.Summarize()
	finishFailoverJob(t, job, name+"-failover-abcde", string(summary), failed)
	phase := v1alpha1.FailoverCompleted
	if failed {
		phase = v1alpha1.FailoverFailed
	}
	waitFailoverPhase(t, ns, name, phase)
}

// expectNotStarted checks that ns/name has no Deployment and no ConfigMap.
func expectNotStarted(t *testing.T, ns, name string) {
	t.Helper()
	if err := get(&appsv1.Deployment{}, ns, name+"-mirror"); !apierrors.IsNotFound(err) {
		t.Fatalf("the failback mirror's Deployment exists (%v) before the failover completed", err)
	}
	if err := get(&corev1.ConfigMap{}, ns, name+"-mirror-config"); !apierrors.IsNotFound(err) {
		t.Fatalf("the failback mirror's ConfigMap exists (%v) before the failover completed", err)
	}
}

// TestFailbackWaitsForTheFailover: a mirror with spec.initialPositions.fromFailover is
// not started while the named KafkaMirror has not completed its failover (Ready and
// TopicsSynced False, WaitingForFailover, naming the field); the failover's completion
// starts it at once (the named mirror is watched), with the named mirror's consumer
// group as mirror.yaml initialPositions.fromFailover. The two mirror between the same
// clusters in both directions, the failed-over one without provenance: that is no
// mirror loop, as they never run together.
func TestFailbackWaitsForTheFailover(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, orig, back = "t-failover", "fb-orig", "fb-back"
	create(t, testMirror(ns, orig, `fb\..*`, func(m *v1alpha1.KafkaMirror) { m.Spec.ConsumerGroup = "orders-mirror" }))
	waitCondition(t, ns, orig, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	create(t, testMirror(ns, back, `fb\..*`, failbackFrom(orig), func(m *v1alpha1.KafkaMirror) {
		// Longer than the test: only the watch on the named mirror can end the wait.
		m.Spec.TopicSyncInterval = &metav1.Duration{Duration: time.Hour}
	}))

	_, cond := waitCondition(t, ns, back, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForFailover)
	expect(t, "Ready message", cond.Message,
		`spec.initialPositions.fromFailover: "fb-orig": it declares no failover (spec.failover); the mirror starts once its failover completed`)
	waitCondition(t, ns, back, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonWaitingForFailover)
	waitCondition(t, ns, back, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	expectNotStarted(t, ns, back)

	completeFailover(t, ns, orig, false)
	_, cond = waitCondition(t, ns, orig, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonFailedOver)
	expect(t, "TopicsSynced of the failed-over mirror", cond.Message, "the mirror failed over: its topics are no longer synced")

	// The failover's completion (a status change) starts the failback mirror.
	cm := &corev1.ConfigMap{}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(cm, ns, back+"-mirror-config"); err != nil {
			b := &v1alpha1.KafkaMirror{}
			_ = get(b, ns, back)
			return fmt.Errorf("%w; the failback mirror's conditions: %+v", err, b.Status.Conditions)
		}
		return nil
	})
	cfg, err := config.Parse([]byte(cm.Data[configKey]))
	if err != nil {
		t.Fatalf("the engine rejects the failback mirror's mirror.yaml: %v\n%s", err, cm.Data[configKey])
	}
	if cfg.InitialPositions == nil {
		t.Fatalf("mirror.yaml has no initialPositions:\n%s", cm.Data[configKey])
	}
	expect(t, "mirror.yaml initialPositions", *cfg.InitialPositions, config.InitialPositions{FromFailover: "orders-mirror"})
	d := &appsv1.Deployment{}
	if err := get(d, ns, back+"-mirror"); err != nil || *d.Spec.Replicas != 1 {
		t.Fatalf("the failback mirror's Deployment has %v replicas (%v), want 1", d.Spec.Replicas, err)
	}
	// The status is written at the end of the reconcile that wrote the children.
	m, _ := waitCondition(t, ns, back, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady)
	if ip := m.Status.InitialPositions; ip == nil || ip.FromFailover != orig || ip.ConsumerGroup != "orders-mirror" || ip.ResolvedTime == nil {
		t.Fatalf("status.initialPositions is %+v, want the resolved failover", ip)
	}

	// Once started, the failback mirror no longer needs the failed-over one.
	orig2 := &v1alpha1.KafkaMirror{}
	if err := get(orig2, ns, orig); err != nil {
		t.Fatal(err)
	}
	if err := env.client.Delete(context.Background(), orig2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := get(&v1alpha1.KafkaMirror{}, ns, orig); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s is still there (%v)", orig, err)
		}
		return nil
	})
	// A spec change makes a reconcile that must not stop the mirror.
	m = &v1alpha1.KafkaMirror{}
	if err := get(m, ns, back); err != nil {
		t.Fatal(err)
	}
	m.Spec.Streams = 2
	if err := env.client.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, back, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	_, cond = waitCondition(t, ns, back, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady)
	if err := get(cm, ns, back+"-mirror-config"); err != nil || !strings.Contains(cm.Data[configKey], "fromFailover: orders-mirror") {
		t.Fatalf("after the failed-over mirror's deletion mirror.yaml is (%v)\n%s", err, cm.Data[configKey])
	}
}

// TestFailbackRefused: a failback mirror whose named KafkaMirror does not exist waits
// for it; one whose named failover failed, or went to another cluster than this
// mirror's source, is Stalled (FailoverNotUsable) with the field and why. None is
// started.
func TestFailbackRefused(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-failover"
	create(t, testMirror(ns, "fb-failed", `fbfailed\..*`))
	completeFailover(t, ns, "fb-failed", true)

	tests := map[string]struct {
		name, from string
		mutate     func(*v1alpha1.KafkaMirror)
		reason     string
		message    string
	}{
		"missing": {
			name: "fb-to-missing", from: "fb-nobody",
			reason:  v1alpha1.ReasonWaitingForFailover,
			message: `spec.initialPositions.fromFailover: "fb-nobody": no KafkaMirror of that name in namespace t-failover; the mirror starts once it exists and its failover completed`,
		},
		"failover failed": {
			name: "fb-to-failed", from: "fb-failed",
			reason:  v1alpha1.ReasonFailoverNotUsable,
			message: `spec.initialPositions.fromFailover: "fb-failed": its failover failed (the source grew past the timeout); delete its Job fb-failed-failover to run it again, and the mirror starts once it completed`,
		},
		"another cluster": {
			name: "fb-wrong-cluster", from: "fb-failed",
			// Reads the failed-over mirror's source, not the cluster it failed over to.
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Source.BootstrapServers, m.Spec.Target.BootstrapServers = env.source.ListenAddrs(), env.target.ListenAddrs()
			},
			reason: v1alpha1.ReasonFailoverNotUsable,
			message: fmt.Sprintf(`spec.initialPositions.fromFailover: "fb-failed": its target cluster (%s) is not this mirror's source cluster (%s): they share no bootstrap server; a failback reads the cluster the failover went to`,
				strings.Join(env.target.ListenAddrs(), ","), strings.Join(env.source.ListenAddrs(), ",")),
		},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			mutate := []func(*v1alpha1.KafkaMirror){failbackFrom(tc.from)}
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			create(t, testMirror(ns, tc.name, `fbrefused\..*`, mutate...))
			_, cond := waitCondition(t, ns, tc.name, v1alpha1.ConditionReady, metav1.ConditionFalse, tc.reason)
			expect(t, "Ready message", cond.Message, tc.message)
			stalled := metav1.ConditionFalse
			if tc.reason == v1alpha1.ReasonFailoverNotUsable {
				stalled = metav1.ConditionTrue
				_, cond = waitCondition(t, ns, tc.name, v1alpha1.ConditionStalled, stalled, tc.reason)
				expect(t, "Stalled message", cond.Message, tc.message)
			} else {
				waitCondition(t, ns, tc.name, v1alpha1.ConditionStalled, stalled, v1alpha1.ReasonReconciled)
			}
			expectNotStarted(t, ns, tc.name)
		})
	}
}

// TestInitialPositionsAdmission: the API server refuses spec.initialPositions set,
// changed or removed after creation (a running mirror starts from its own progress),
// and admits it at creation.
func TestInitialPositionsAdmission(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const immutable = "initialPositions is immutable: it can only be given at creation"
	from := func(name string) func(*v1alpha1.KafkaMirror) {
		return func(m *v1alpha1.KafkaMirror) {
			m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true}
			m.Spec.InitialPositions = nil
			if name != "" {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: name}
			}
		}
	}
	tests := map[string]struct {
		initial, updated string
		wantErr          string
	}{
		"changed": {initial: "orders", updated: "payments", wantErr: immutable},
		"removed": {initial: "orders", updated: "", wantErr: immutable},
		"added":   {initial: "", updated: "orders", wantErr: immutable},
		"kept":    {initial: "orders", updated: "orders"},
	}
	i := 0
	for name, tc := range tests {
		i++
		m := celMirror(fmt.Sprintf("initial-positions-%d", i), from(tc.initial))
		t.Run(name, func(t *testing.T) {
			create(t, m)
			from(tc.updated)(m)
			m.Spec.Streams = 2 // a change that is always allowed
			err := env.client.Update(context.Background(), m)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "spec.initialPositions")):
				t.Fatalf("update returned %v, want %q at spec.initialPositions", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("update rejected: %v", err)
			}
		})
	}
}
