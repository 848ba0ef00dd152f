package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// suiteAllowedBootstrapServers is the suite manager's allow-list: the kfake clusters
// listen on 127.0.0.1, so "localhost:<port>" reaches the same brokers by a name the
// operator must refuse.
var suiteAllowedBootstrapServers = []string{"127.0.0.1:*"}

// suiteAllowedEndpoints is the suite manager's endpoint allow-list: the token endpoint the
// managed-auth test names, never the local test servers.
var suiteAllowedEndpoints = []string{"https://idp.example"}

func TestBootstrapAllowList(t *testing.T) {
	tests := map[string]struct {
		patterns []string
		allowed  []string
		refused  []string
	}{
		"empty allows every address": {
			allowed: []string{"kafka:9092", "evil.example.com:1", "[::1]:9092"},
		},
		"subdomain wildcard with a fixed port": {
			patterns: []string{"*.kafka.svc:9092"},
			allowed:  []string{"a.kafka.svc:9092", "broker-0.a.kafka.svc:9092", "A.KAFKA.SVC:9092"},
			refused:  []string{"kafka.svc:9092", "a.kafka.svc:9093", "a.kafka.svc.evil.com:9092", "a.kafkaXsvc:9092", "evil.com:1.kafka.svc:9092"},
		},
		"name prefix with any port": {
			patterns: []string{"kafka-*.example.com:*"},
			allowed:  []string{"kafka-0.example.com:9092", "kafka-.example.com:1"},
			refused:  []string{"kafka.example.com:9092", "kafka-0.example.com.evil:9092", "kafka-0.example.com"},
		},
		"several patterns and an exact address": {
			patterns: []string{"10.0.0.1:9092", "*.kafka.svc:9092"},
			allowed:  []string{"10.0.0.1:9092", "x.kafka.svc:9092"},
			refused:  []string{"10.0.0.10:9092", "10a0a0a1:9092"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := NewBootstrapAllowList(tc.patterns)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.allowed {
				if !a.Allows(s) {
					t.Errorf("%q refused by %q, want allowed", s, tc.patterns)
				}
			}
			for _, s := range tc.refused {
				if a.Allows(s) {
					t.Errorf("%q allowed by %q, want refused", s, tc.patterns)
				}
			}
		})
	}
}

func TestBootstrapAllowListRejectsPatternsWithoutPort(t *testing.T) {
	for _, p := range []string{"kafka.svc", "kafka.svc:", ":9092", ""} {
		if _, err := NewBootstrapAllowList([]string{p}); err == nil || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("pattern %q: err %v, want one saying host:port", p, err)
		}
	}
}

func TestCheckReachNamesEveryRefusedField(t *testing.T) {
	allowed, err := NewBootstrapAllowList([]string{"*.kafka.svc:9092"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMirror("ns", "m", ".*", func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.BootstrapServers = []string{"a.kafka.svc:9092", "evil.example.com:9092"}
		m.Spec.Target.BootstrapServers = []string{"other.example.com:9092"}
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: "user",
			PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}}
	})
	err = checkReach(m, allowed)
	want := `spec.source.bootstrapServers[1]: "evil.example.com:9092" is not in the operator's allowed bootstrap servers (*.kafka.svc:9092); ` +
		`spec.target.bootstrapServers[0]: "other.example.com:9092" is not in the operator's allowed bootstrap servers (*.kafka.svc:9092)`
	if err == nil || err.Error() != want {
		t.Fatalf("checkReach = %v, want %s", err, want)
	}
	st := computeStatus(m, &observation{invalid: err})
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionStalled && (c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonBootstrapServerNotAllowed) {
			t.Errorf("Stalled is %s/%s, want True/%s", c.Status, c.Reason, v1alpha1.ReasonBootstrapServerNotAllowed)
		}
	}
	if !warningReasons[v1alpha1.ReasonBootstrapServerNotAllowed] {
		t.Error("a refused bootstrap server is not a Warning event, though a person must act on it")
	}
}

// TestBootstrapServerNotAllowed runs against the suite's manager, which allows only
// 127.0.0.1:*: a KafkaMirror naming any other address is Stalled with the field path,
// gets no children, and the operator never connects to the address, even where a
// broker listens.
func TestBootstrapServerNotAllowed(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-reach"

	// A broker that counts every request it receives, reachable as localhost:<port>.
	outside, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	var requests atomic.Int64
	outside.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		requests.Add(1)
		return nil, nil, false
	})
	_, port, _ := strings.Cut(outside.ListenAddrs()[0], "127.0.0.1:")
	outsideAddr := "localhost:" + port

	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		Data: map[string][]byte{"password": []byte(securePassword)}})
	sasl := &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: secureUser,
		PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}}
	tests := map[string]struct {
		mutate   func(*v1alpha1.KafkaMirror)
		wantPath string
		addr     string
	}{
		"source": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Source = v1alpha1.ClusterSpec{BootstrapServers: []string{outsideAddr}, SASL: sasl}
			},
			wantPath: "spec.source.bootstrapServers[0]",
			addr:     outsideAddr,
		},
		"target": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Target = v1alpha1.ClusterSpec{BootstrapServers: []string{env.target.ListenAddrs()[0], "evil.example.com:9092"}, SASL: sasl}
			},
			wantPath: "spec.target.bootstrapServers[1]",
			addr:     "evil.example.com:9092",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mname := "outside-" + name
			create(t, testMirror(ns, mname, `reach\..*`, tc.mutate))
			m, c := waitCondition(t, ns, mname, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonBootstrapServerNotAllowed)
			wantMsg := fmt.Sprintf(`%s: %q is not in the operator's allowed bootstrap servers (127.0.0.1:*)`, tc.wantPath, tc.addr)
			expect(t, "Stalled message", c.Message, wantMsg)
			expect(t, "observedGeneration", m.Status.ObservedGeneration, m.Generation)
			waitCondition(t, ns, mname, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonBootstrapServerNotAllowed)
			waitCondition(t, ns, mname, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonBootstrapServerNotAllowed)
			for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}} {
				if err := get(obj, ns, mname+"-mirror"); !apierrors.IsNotFound(err) {
					t.Errorf("a %T exists for a refused bootstrap server (err %v)", obj, err)
				}
			}
		})
	}

	t.Run("a Warning event names the field and no credential leaks", func(t *testing.T) {
		var events eventsv1.EventList
		testutil.Eventually(t, 45*time.Second, func() error {
			if err := env.client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.Reason == v1alpha1.ReasonBootstrapServerNotAllowed && e.Type == corev1.EventTypeWarning &&
					strings.Contains(e.Note, "spec.source.bootstrapServers[0]") {
					return nil
				}
			}
			return fmt.Errorf("no Warning %s event naming spec.source.bootstrapServers[0] among %d events", v1alpha1.ReasonBootstrapServerNotAllowed, len(events.Items))
		})
		var mirrors v1alpha1.KafkaMirrorList
		if err := env.client.List(context.Background(), &mirrors, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for what, obj := range map[string]any{"KafkaMirrors": mirrors, "events": events} {
			b, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), securePassword) {
				t.Errorf("the password appears in the %s", what)
			}
		}
		if strings.Contains(env.logs.String(), securePassword) {
			t.Error("the password appears in the logs")
		}
	})

	// Reconciles of the refused mirrors are over (both are Stalled with the current
	// generation): nothing dialled the outside broker.
	if n := requests.Load(); n != 0 {
		t.Fatalf("the broker behind a refused address received %d requests, want 0", n)
	}

	t.Run("an allowed address clears Stalled", func(t *testing.T) {
		testutil.Eventually(t, 90*time.Second, func() error {
			m := &v1alpha1.KafkaMirror{}
			if err := get(m, ns, "outside-source"); err != nil {
				return err
			}
			m.Spec.Source = v1alpha1.ClusterSpec{BootstrapServers: env.source.ListenAddrs()}
			return env.client.Update(context.Background(), m)
		})
		waitCondition(t, ns, "outside-source", v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
		testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, ns, "outside-source-mirror") })
	})
}
