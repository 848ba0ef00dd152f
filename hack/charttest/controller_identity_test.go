package charttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/twmb/franz-go/pkg/kfake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// runControllerAs runs the real operator (controllers.NewManager, with leader election)
// against the API server as the chart's ServiceAccount, through impersonation, and checks
// that it reconciles a KafkaMirror in namespace into its children and status, with the
// SASL password from a Secret, and that a rotation of the Secret rolls the mirror pods. A
// missing permission shows up as a child that never appears, a condition that stays
// false or a "forbidden" in the operator's log: this is the chart's RBAC checked against
// what the controller really does, not against what it declares.
func runControllerAs(t *testing.T, cfg *rest.Config, c client.Client, operator serviceAccount, watch []string, namespace string) {
	t.Helper()
	const user, password = "mirror", "charttest-password"
	source, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders.created"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, password))
	if err != nil {
		t.Fatalf("while starting the source kfake cluster: %v", err)
	}
	defer source.Close()
	target, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("while starting the target kfake cluster: %v", err)
	}
	defer target.Close()

	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{
		UserName: operator.name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operator.namespace, "system:authenticated"},
	}
	logs := &testutil.SyncBuffer{}
	const image = "registry.example/kafka-mirror:charttest"
	mgr, err := controllers.NewManager(asOperator, controllers.ManagerOptions{
		Image:                        image,
		WatchNamespaces:              watch,
		MetricsAddress:               "0",
		HealthProbeAddress:           "0",
		LeaderElection:               true,
		LeaderElectionNamespace:      operator.namespace,
		SecretPollInterval:           time.Second,
		SkipControllerNameValidation: true,
		Logger:                       funcr.New(func(prefix, args string) { fmt.Fprintf(logs, "%s %s\n", prefix, args) }, funcr.Options{}),
	})
	if err != nil {
		t.Fatalf("while creating the operator's manager: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the operator stopped with an error: %v", err)
		}
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	}()

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders-source-creds"},
		Data: map[string][]byte{"password": []byte(password)}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatalf("while creating the source credentials: %v", err)
	}
	mirror := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kafkamirror.io/v1alpha1",
		"kind":       "KafkaMirror",
		"metadata":   map[string]any{"name": "orders", "namespace": namespace},
		"spec": map[string]any{
			"source": map[string]any{"bootstrapServers": toAny(source.ListenAddrs()), "sasl": map[string]any{
				"mechanism": "SCRAM-SHA-512", "username": user, "passwordSecretRef": map[string]any{"name": secret.Name}}},
			"target":   map[string]any{"bootstrapServers": toAny(target.ListenAddrs())},
			"topics":   map[string]any{"include": []any{`orders\..*`}},
			"replicas": int64(2),
		},
	}}
	// The CRD was applied a moment ago: wait until the API serves the kind.
	testutil.Eventually(t, 45*time.Second, func() error { return c.Create(ctx, mirror.DeepCopy()) })
	// The next operator a test runs (cluster-wide, perhaps) must not find this one's mirror.
	defer func() {
		if err := c.Delete(context.Background(), mirror.DeepCopy()); err != nil {
			t.Errorf("while deleting KafkaMirror %s/%s: %v", namespace, mirror.GetName(), err)
		}
	}()

	children := []struct {
		gvk  schema.GroupVersionKind
		name string
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "orders-mirror"},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "orders-mirror-config"},
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "orders-mirror-metrics"},
		{schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, "orders-mirror"},
	}
	testutil.Eventually(t, 90*time.Second, func() error {
		for _, child := range children {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(child.gvk)
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: child.name}, u); err != nil {
				return fmt.Errorf("%s %s: %w", child.gvk.Kind, child.name, err)
			}
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(mirror.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(mirror), got); err != nil {
			return err
		}
		if s := conditionStatus(got, "TopicsSynced"); s != "True" {
			return fmt.Errorf("TopicsSynced is %q, want True", s)
		}
		if generation, observed := got.GetGeneration(), nestedInt(got, "status", "observedGeneration"); observed != generation {
			return fmt.Errorf("status.observedGeneration %d, want %d", observed, generation)
		}
		return nil
	})

	deploy := &unstructured.Unstructured{}
	deploy.SetGroupVersionKind(children[0].gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "orders-mirror"}, deploy); err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 || containers[0].(map[string]any)["image"] != image {
		t.Errorf("mirror Deployment containers = %v, want the engine image %s", containers, image)
	}

	// A rotated Secret rolls the pods: the operator notices it with `get` alone.
	hash := func() string {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "orders-mirror"}, deploy); err != nil {
			return "unknown: " + err.Error()
		}
		h, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "metadata", "annotations", controllers.ConfigHashAnnotation)
		return h
	}
	before := hash()
	secret.Data["password"] = []byte("rotated")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatalf("while rotating the source credentials: %v", err)
	}
	testutil.Eventually(t, 45*time.Second, func() error {
		if after := hash(); after == before {
			return fmt.Errorf("the mirror's pod template hash is still %s after the Secret was rotated", before)
		}
		return nil
	})

	lease := &unstructured.Unstructured{}
	lease.SetGroupVersionKind(schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"})
	if err := c.Get(ctx, client.ObjectKey{Namespace: operator.namespace, Name: controllers.DefaultLeaderElectionID}, lease); err != nil {
		t.Errorf("the operator holds no leader-election Lease in %s: %v", operator.namespace, err)
	} else if holder, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity"); holder == "" {
		t.Errorf("Lease %s has no holder", lease.GetName())
	}
	if strings.Contains(strings.ToLower(logs.String()), "forbidden") {
		t.Errorf("the operator was refused something by RBAC; see its log")
	}
}

func conditionStatus(u *unstructured.Unstructured, conditionType string) string {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if c, ok := c.(map[string]any); ok && c["type"] == conditionType {
			s, _ := c["status"].(string)
			return s
		}
	}
	return ""
}

func nestedInt(u *unstructured.Unstructured, path ...string) int64 {
	v, _, _ := unstructured.NestedInt64(u.Object, path...)
	return v
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
