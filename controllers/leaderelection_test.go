package controllers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// operatorIdentity binds the roles in config/rbac to a service account in ns and returns
// a client config acting as it: the generated manager ClusterRole cluster-wide, the
// generated Secret reader in ns only (a RoleBinding, as the chart's rbac.secretNamespaces
// binds it) and the leader-election Role. Managers using it prove that the generated rules
// are enough. The cluster-scoped objects are named after ns, so tests may each have one.
func operatorIdentity(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	const sa = "kafka-mirror-operator"
	user := "system:serviceaccount:" + ns + ":" + sa
	cfg := rest.CopyConfig(env.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}

	// Without the bindings the service account may do nothing: RBAC is really enforced.
	as, err := client.New(cfg, client.Options{Scheme: env.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := as.List(ctx, &v1alpha1.KafkaMirrorList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing KafkaMirrors as an unbound service account: %v, want forbidden", err)
	}

	roles := generatedClusterRoles(t)
	manager, secretReader := roles["kafka-mirror-manager"], roles["kafka-mirror-secret-reader"]
	if manager == nil || secretReader == nil || len(roles) != 2 {
		t.Fatalf("config/rbac/role.yaml holds %d roles, want kafka-mirror-manager and kafka-mirror-secret-reader", len(roles))
	}
	manager.Name, secretReader.Name = ns+"-"+manager.Name, ns+"-"+secretReader.Name
	leRole := &rbacv1.Role{}
	data, err := os.ReadFile("../config/rbac/leader_election_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, leRole); err != nil {
		t.Fatalf("leader_election_role.yaml: %v", err)
	}
	leRole.Namespace = ns
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
		manager, secretReader, leRole,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: manager.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: manager.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-mirror-secret-reader"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: secretReader.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-mirror-leader-election"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leRole.Name}},
	} {
		create(t, obj)
	}
	testutil.Eventually(t, 90*time.Second, func() error { return as.List(ctx, &v1alpha1.KafkaMirrorList{}) })
	return cfg
}

// generatedClusterRoles reads config/rbac/role.yaml, which controller-gen writes with one
// ClusterRole per roleName of the +kubebuilder:rbac markers, by name.
func generatedClusterRoles(t *testing.T) map[string]*rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	roles := map[string]*rbacv1.ClusterRole{}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("config/rbac/role.yaml: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(doc, role); err != nil {
			t.Fatalf("config/rbac/role.yaml: %v", err)
		}
		if role.Kind != "ClusterRole" || roles[role.Name] != nil {
			t.Fatalf("config/rbac/role.yaml: a %s %q (twice?), want ClusterRoles", role.Kind, role.Name)
		}
		roles[role.Name] = role
	}
	return roles
}

// runningManager is one operator replica started by a test.
type runningManager struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

func startManager(t *testing.T, cfg *rest.Config, ns string) *runningManager {
	t.Helper()
	mgr, err := NewManager(cfg, ManagerOptions{
		Image:                   testImage,
		WatchNamespaces:         []string{ns},
		MetricsAddress:          "0",
		HealthProbeAddress:      "0",
		LeaderElection:          true,
		LeaderElectionNamespace: ns,
		// client-go's defaults for the lease, so a CPU stall of seconds on a busy
		// machine does not cost the leader its Lease (the test would see two leaders);
		// the leader releases the Lease when stopped, so the hand-over still takes
		// about one RetryPeriod.
		LeaseDuration:                15 * time.Second,
		RenewDeadline:                10 * time.Second,
		RetryPeriod:                  time.Second,
		SkipControllerNameValidation: true,
		Logger:                       newTestLogger(env.logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningManager{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *runningManager) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // stop may be called again by cleanup
}

func (r *runningManager) elected() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// TestLeaderElection: two replicas, one leader; when the leader stops, the other takes
// the Lease and goes on reconciling. Both run with only the generated RBAC.
func TestLeaderElection(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-le"
	cfg := operatorIdentity(t, ns)

	first := startManager(t, cfg, ns)
	testutil.Eventually(t, 45*time.Second, func() error {
		if !first.elected() {
			return fmt.Errorf("the first manager is not the leader yet")
		}
		return nil
	})
	second := startManager(t, cfg, ns)

	create(t, testMirror(ns, "le-one", `le\..*`))
	testutil.Eventually(t, 60*time.Second, func() error { return get(&appsv1.Deployment{}, ns, "le-one-mirror") })
	waitCondition(t, ns, "le-one", v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)
	if second.elected() {
		t.Fatal("both managers are leaders")
	}
	lease := &coordinationv1.Lease{}
	if err := get(lease, ns, DefaultLeaderElectionID); err != nil {
		t.Fatalf("no Lease %s: %v", DefaultLeaderElectionID, err)
	}
	firstHolder := *lease.Spec.HolderIdentity

	first.stop()
	testutil.Eventually(t, 90*time.Second, func() error {
		if !second.elected() {
			return fmt.Errorf("the second manager has not taken over")
		}
		return nil
	})
	if err := get(lease, ns, DefaultLeaderElectionID); err != nil || *lease.Spec.HolderIdentity == firstHolder {
		t.Fatalf("the Lease is still held by %s (err %v)", firstHolder, err)
	}

	// The new leader reconciles: new KafkaMirrors and deleted children.
	create(t, testMirror(ns, "le-two", `le\..*`))
	testutil.Eventually(t, 60*time.Second, func() error { return get(&appsv1.Deployment{}, ns, "le-two-mirror") })
	d := &appsv1.Deployment{}
	if err := get(d, ns, "le-one-mirror"); err != nil {
		t.Fatal(err)
	}
	uid := d.UID
	if err := env.client.Delete(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		if err := get(d, ns, "le-one-mirror"); err != nil {
			return err
		}
		if d.UID == uid {
			return fmt.Errorf("not deleted yet")
		}
		return nil
	})
}
