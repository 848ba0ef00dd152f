package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestSecretsWithGetOnly runs the operator as a service account bound to exactly
// config/rbac's rules, the Secret reader in the mirror's namespace only (as the chart's
// rbac.secretNamespaces binds it). That account may not list or watch Secrets anywhere,
// nor read a Secret in another namespace (a KafkaMirror there that names one is told
// so); the operator still authenticates with the
// referenced Secret, notices its rotation and rolls the pods (with no topic sync due for
// an hour, so only the Secret poller can have noticed), and is refused nothing.
func TestSecretsWithGetOnly(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, other, name = "t-secret-get", "t-secret-other", "getonly"
	for _, n := range []string{ns, other} {
		create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	cfg := operatorIdentity(t, ns)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "db-root"}, Data: map[string][]byte{"password": []byte("not-for-the-operator")}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte(securePassword)}}
	create(t, secret)

	t.Run("the operator's account may get Secrets by name in the mirror's namespace only", func(t *testing.T) {
		as, err := client.NewWithWatch(cfg, client.Options{Scheme: env.client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := as.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err != nil {
			t.Errorf("get Secret %s/creds: %v, want allowed", ns, err)
		}
		refused := map[string]error{
			"get Secret " + other + "/db-root": as.Get(ctx, client.ObjectKey{Namespace: other, Name: "db-root"}, &corev1.Secret{}),
			"list Secrets in " + ns:            as.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
			"list Secrets cluster-wide":        as.List(ctx, &corev1.SecretList{}),
		}
		if w, err := as.Watch(ctx, &corev1.SecretList{}, client.InNamespace(ns)); err == nil {
			w.Stop()
			refused["watch Secrets in "+ns] = nil
		} else {
			refused["watch Secrets in "+ns] = err
		}
		for what, err := range refused {
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: %v, want forbidden", what, err)
			}
		}
	})

	logs := &testutil.SyncBuffer{}
	mgr, err := NewManager(cfg, ManagerOptions{
		Image:                        testImage,
		WatchNamespaces:              []string{ns, other},
		MetricsAddress:               "0",
		HealthProbeAddress:           "0",
		SecretPollInterval:           500 * time.Millisecond,
		SkipControllerNameValidation: true,
		Logger:                       newTestLogger(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with an error: %v", err)
		}
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	}()

	createTopic(t, kafkaAdmin(t, env.secure), "getonly.a", 1)
	create(t, testMirror(ns, name, `getonly\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source = v1alpha1.ClusterSpec{
			BootstrapServers: env.secure.ListenAddrs(),
			SASL: &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: secureUser,
				PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}},
		}
		// No periodic reconcile re-reads the Secret during the test: no topic sync is due
		// for an hour, and no pod is wanted, so none is waited for (notReadyRecheck).
		m.Spec.TopicSyncInterval = &metav1.Duration{Duration: time.Hour}
		m.Spec.Replicas = ptr.To[int32](0)
	}))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)
	d := &appsv1.Deployment{}
	if err := get(d, ns, name+"-mirror"); err != nil {
		t.Fatal(err)
	}
	hash := d.Spec.Template.Annotations[ConfigHashAnnotation]

	secret.Data["password"] = []byte("rotated-and-wrong")
	if err := env.client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 45*time.Second, func() error {
		if err := get(d, ns, name+"-mirror"); err != nil {
			return err
		}
		if d.Spec.Template.Annotations[ConfigHashAnnotation] == hash {
			return fmt.Errorf("the pod template hash did not change after the Secret was rotated")
		}
		return nil
	})
	// The new password is used at once: the credentials are part of the sync input.
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonSourceUnreachable)

	// A KafkaMirror in a namespace where the operator may not read Secrets is told so, and
	// learns nothing of the Secret.
	create(t, testMirror(other, "stranger", `getonly\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source = v1alpha1.ClusterSpec{
			BootstrapServers: env.secure.ListenAddrs(),
			SASL: &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: secureUser,
				PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "db-root"}},
		}
	}))
	// The API server refused the operator's get with a 403: the condition says which field
	// names which Secret, and how to grant it, and nothing of the Secret's content.
	const wantMsg = `the operator may not read Secret "db-root" in namespace "t-secret-other" (used by spec.source.sasl.passwordSecretRef): ` +
		`add namespace "t-secret-other" to the chart value rbac.secretNamespaces ` +
		`(kustomize: a RoleBinding there to the ClusterRole kafka-mirror-secret-reader)`
	stranger, c := waitCondition(t, other, "stranger", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretForbidden)
	expect(t, "unreadable Secret message", c.Message, wantMsg)
	topics := meta.FindStatusCondition(stranger.Status.Conditions, v1alpha1.ConditionTopicsSynced)
	if topics == nil || topics.Reason != v1alpha1.ReasonSecretForbidden || topics.Message != wantMsg {
		t.Errorf("TopicsSynced = %+v, want reason %s and the same message", topics, v1alpha1.ReasonSecretForbidden)
	}
	if s := meta.FindStatusCondition(stranger.Status.Conditions, v1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
		t.Errorf("Stalled = %+v: an RBAC grant fixes it, and the poller notices that", s)
	}
	// A Warning event with the same reason, and never the Secret's content anywhere.
	testutil.Eventually(t, 45*time.Second, func() error {
		var events eventsv1.EventList
		if err := env.client.List(ctx, &events, client.InNamespace(other)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "stranger" && e.Reason == v1alpha1.ReasonSecretForbidden && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Warning event %s on KafkaMirror stranger among %d events", v1alpha1.ReasonSecretForbidden, len(events.Items))
	})
	if err := get(stranger, other, "stranger"); err != nil {
		t.Fatal(err)
	}
	if status := fmt.Sprintf("%+v", stranger.Status); strings.Contains(status, "not-for-the-operator") || strings.Contains(logs.String(), "not-for-the-operator") {
		t.Errorf("the content of Secret db-root reached the status or the log")
	}

	// The fix the message offers works without touching the KafkaMirror: the Secret poller
	// notices the grant (no backoff retry runs meanwhile), and the operator then uses the
	// Secret (whose password is wrong for the cluster).
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "kafka-mirror-secret-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kafka-mirror-operator", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-kafka-mirror-secret-reader"}})
	stranger, _ = waitCondition(t, other, "stranger", v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonSourceUnreachable)
	if status := fmt.Sprintf("%+v", stranger.Status); strings.Contains(status, "not-for-the-operator") || strings.Contains(logs.String(), "not-for-the-operator") {
		t.Errorf("the content of Secret db-root reached the status or the log")
	}

	// The stranger's reason, SecretForbidden, is expected in the log (its events); any
	// other "forbidden" is a request of the operator's own that RBAC refused.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(strings.ToLower(strings.ReplaceAll(line, v1alpha1.ReasonSecretForbidden, "")), "forbidden") {
			t.Errorf("the operator was refused something by RBAC: %s", line)
		}
	}
}
