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
	_, c := waitCondition(t, other, "stranger", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	expect(t, "unreadable Secret message", c.Message, `the operator may not read Secret "db-root" (used by spec.source.sasl.passwordSecretRef): `+
		`it needs get on Secrets in namespace "t-secret-other" (the Helm chart's rbac.secretNamespaces)`)

	if log := strings.ToLower(logs.String()); strings.Contains(log, "forbidden") {
		t.Errorf("the operator was refused something by RBAC; see its log")
	}
}
