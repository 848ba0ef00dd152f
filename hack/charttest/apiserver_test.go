package charttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// fieldOwner is the server-side apply field manager of everything these tests apply.
const fieldOwner = "kafka-mirror-charttest"

// allVerbs are the verbs checked for least privilege: any of them not granted by
// config/rbac/role.yaml must be denied to the operator.
var allVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// TestInstallOnAPIServer applies the chart and config/default to a real API server with
// server-side dry-run (real admission, schema and CEL validation, as `kubectl apply
// --server-side --dry-run=server` would), then installs the chart for real and checks with
// SubjectAccessReviews that its ServiceAccount may do everything the controller declares in
// config/rbac/role.yaml, and nothing more.
func TestInstallOnAPIServer(t *testing.T) {
	cfg, c := startAPIServer(t)
	ctx := t.Context()

	t.Run("chart with default values, server-side dry-run", func(t *testing.T) {
		createNamespaces(t, c, releaseNamespace)
		applyAll(t, c, renderChart(t, release, releaseNamespace), client.DryRunAll)
	})
	t.Run("chart watching one namespace, server-side dry-run", func(t *testing.T) {
		createNamespaces(t, c, "ops", "team-a")
		applyAll(t, c, renderChart(t, "team-a", "ops", "watchNamespace=team-a", "replicaCount=2",
			"podDisruptionBudget.enabled=true", "image.digest=sha256:"+strings.Repeat("0f", 32)), client.DryRunAll)
	})
	t.Run("server-side dry-run rejects what only the API server can check", func(t *testing.T) {
		// values.schema.json lets Kubernetes objects such as resources through as they are;
		// this proves the dry-run above really validated them.
		objs := renderChart(t, release, releaseNamespace, "resources.limits.memory=lots")
		errs := applyObjects(ctx, c, objs, client.DryRunAll)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Deployment") || !strings.Contains(errs[0].Error(), "quantities must match the regular expression") {
			t.Errorf("dry-run errors = %v, want one Deployment error about the memory quantity", errs)
		}
	})
	t.Run("config/default, server-side dry-run", func(t *testing.T) {
		objs := kustomizeBuild(t, filepath.Join(repoRoot(t), "config", "default"))
		var namespaces []string
		for _, o := range find(objs, "Namespace") {
			namespaces = append(namespaces, o.GetName())
		}
		createNamespaces(t, c, namespaces...)
		for _, kind := range []string{"CustomResourceDefinition", "Deployment", "ServiceAccount", "ClusterRole"} {
			if len(find(objs, kind)) == 0 {
				t.Errorf("config/default has no %s: %s", kind, describeObjects(objs))
			}
		}
		applyAll(t, c, objs, client.DryRunAll)
	})

	t.Run("operator pods meet the restricted Pod Security Standard", func(t *testing.T) {
		createRestrictedNamespace(t, c, "restricted")
		deploy := one(t, renderChart(t, release, releaseNamespace), "Deployment", fullname)
		if err := dryRunPod(ctx, c, "restricted", deploy); err != nil {
			t.Errorf("the chart's operator pod is rejected in a restricted namespace: %v", err)
		}
		unpinned := one(t, renderChart(t, release, releaseNamespace, "pinUserID=false"), "Deployment", fullname)
		if err := dryRunPod(ctx, c, "restricted", unpinned); err != nil {
			t.Errorf("the chart's operator pod with pinUserID=false is rejected in a restricted namespace: %v", err)
		}
		// The same check must be able to fail, or the passes above mean nothing.
		loose := one(t, renderChart(t, release, releaseNamespace, "securityContext.allowPrivilegeEscalation=true"), "Deployment", fullname)
		if err := dryRunPod(ctx, c, "restricted", loose); err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			t.Errorf("a pod allowing privilege escalation was not rejected by PodSecurity: %v", err)
		}
		objs := kustomizeBuild(t, filepath.Join(repoRoot(t), "config", "default"))
		for _, d := range find(objs, "Deployment") {
			if err := dryRunPod(ctx, c, "restricted", d); err != nil {
				t.Errorf("config/default's %s pod is rejected in a restricted namespace: %v", d.GetName(), err)
			}
		}
	})

	rules := declaredRules(t)
	managerRules := roleRules(t, generatedRoles(t)[managerRoleName])
	t.Run("chart RBAC grants every rule the controller declares, cluster-wide, and Secrets in its namespace only", func(t *testing.T) {
		createNamespaces(t, c, "team-b")
		applyAll(t, c, renderChart(t, release, releaseNamespace))
		sa := serviceAccountUser(releaseNamespace, fullname)
		waitForRBAC(ctx, t, c, sa, "", managerRules[0])
		for _, namespace := range []string{"", "team-b"} {
			checkAccess(ctx, t, c, sa, namespace, managerRules)
		}
		// Least privilege by default: no Secret of another namespace, by any verb.
		checkSecretAccess(ctx, t, c, cfg, sa, []string{releaseNamespace, "team-b", ""}, releaseNamespace)
		checkLeaderElection(ctx, t, c, sa, releaseNamespace)
		checkMetricsAuth(ctx, t, c, sa)
		if nonResourceAllowed(ctx, t, c, sa, "/metrics", "get") {
			t.Errorf("the operator's own ServiceAccount may read /metrics; only scrapers bound to the metrics-reader role should")
		}
	})
	t.Run("the operator runs as the chart's ServiceAccount, cluster-wide", func(t *testing.T) {
		// The mirror and its Secret in the release namespace: the one the default values
		// let the operator read Secrets in (the other runs below use mirrors elsewhere).
		runControllerAs(t, cfg, c, serviceAccountUser(releaseNamespace, fullname), nil, releaseNamespace)
	})
	t.Run("namespaced chart RBAC grants the rules in the watched namespaces only", func(t *testing.T) {
		createNamespaces(t, c, "ops-ns", "team-c", "team-d")
		// A second release in one cluster: the CRD and the aggregated roles belong to the first.
		applyAll(t, c, renderChart(t, "team-cd", "ops-ns", `watchNamespace=team-c\,team-d`, "crds.enabled=false",
			"rbac.aggregatedRoles.enabled=false"))
		sa := serviceAccountUser("ops-ns", "team-cd-kafka-mirror-operator")
		waitForRBAC(ctx, t, c, sa, "team-d", rules[0])
		checkAccess(ctx, t, c, sa, "team-c", rules)
		checkAccess(ctx, t, c, sa, "team-d", rules)
		for _, namespace := range []string{"", "team-a"} {
			for _, r := range rules {
				if allowed(ctx, t, c, sa, namespace, r.group, r.resource, r.verbs[0]) {
					t.Errorf("namespaced operator may %s %s in %q; it should be confined to team-c and team-d", r.verbs[0], r.resource, namespace)
				}
			}
		}
		checkLeaderElection(ctx, t, c, sa, "ops-ns")
		// The HTTPS metrics' reviews are cluster-scoped: granted also to a namespaced operator.
		checkMetricsAuth(ctx, t, c, sa)
	})
	t.Run("the operator runs as the namespaced chart's ServiceAccount", func(t *testing.T) {
		runControllerAs(t, cfg, c, serviceAccountUser("ops-ns", "team-cd-kafka-mirror-operator"), []string{"team-c", "team-d"}, "team-d")
	})
	t.Run("chart with rbac.secretNamespaces: Secrets by name there only, never listed or watched", func(t *testing.T) {
		checkSecretNamespaces(ctx, t, cfg, c)
	})
	t.Run(`chart with rbac.secretNamespaces=["*"]: Secrets by name in every namespace, never listed or watched`, func(t *testing.T) {
		createNamespaces(t, c, "ops-all", "team-g")
		applyAll(t, c, renderChart(t, "all", "ops-all", "rbac.secretNamespaces={*}", "crds.enabled=false",
			"rbac.aggregatedRoles.enabled=false"))
		sa := serviceAccountUser("ops-all", "all-kafka-mirror-operator")
		waitForRBAC(ctx, t, c, sa, "", rbacRule{resource: "secrets", verbs: []string{"get"}})
		checkSecretAccess(ctx, t, c, cfg, sa, []string{"team-g", "ops-all", ""}, "team-g", "ops-all", "")
	})
	t.Run("the metrics-reader role lets a scraper get /metrics", func(t *testing.T) {
		checkMetricsReader(ctx, t, c)
	})
	t.Run("the admission policy refuses bootstrap servers outside the allow-list", func(t *testing.T) {
		checkAdmissionPolicy(ctx, t, c)
	})
}

// checkSecretNamespaces installs a cluster-wide release whose operator may read Secrets in
// team-e only (rbac.secretNamespaces) and proves, as its ServiceAccount, that it cannot
// read a Secret in another namespace, nor list or watch Secrets anywhere, while it runs a
// KafkaMirror in team-e with its credentials from a Secret.
func checkSecretNamespaces(ctx context.Context, t *testing.T, cfg *rest.Config, c client.Client) {
	t.Helper()
	createNamespaces(t, c, "ops-e", "team-e", "team-f")
	applyAll(t, c, renderChart(t, "team-e", "ops-e", "rbac.secretNamespaces={team-e}", "crds.enabled=false",
		"rbac.aggregatedRoles.enabled=false"))
	sa := serviceAccountUser("ops-e", "team-e-kafka-mirror-operator")
	waitForRBAC(ctx, t, c, sa, "team-e", rbacRule{resource: "secrets", verbs: []string{"get"}})
	// The release namespace is always readable; team-f, which no value names, is not.
	checkSecretAccess(ctx, t, c, cfg, sa, []string{"team-e", "team-f", "ops-e", ""}, "team-e", "ops-e")
	runControllerAs(t, cfg, c, sa, nil, "team-e")
}

// checkSecretAccess proves that user may get Secrets by name in the readable namespaces
// ("" is every namespace) and do nothing else with Secrets in any of namespaces: through
// SubjectAccessReviews for every verb, and through the API as the operator's own client
// would ask, impersonating user, for a Secret created in each named namespace.
func checkSecretAccess(ctx context.Context, t *testing.T, c client.Client, cfg *rest.Config, user serviceAccount, namespaces []string, readable ...string) {
	t.Helper()
	for _, namespace := range namespaces {
		for _, verb := range allVerbs {
			want := verb == "get" && (slices.Contains(readable, namespace) || slices.Contains(readable, ""))
			if got := allowed(ctx, t, c, user, namespace, "", "secrets", verb); got != want {
				t.Errorf("%s may %s secrets in %q: %v, want %v", user.name, verb, namespace, got, want)
			}
		}
	}
	asOperator := rest.CopyConfig(cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: user.name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + user.namespace, "system:authenticated"}}
	as, err := client.New(asOperator, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, namespace := range namespaces {
		if namespace == "" {
			continue
		}
		// A Secret no KafkaMirror references, such as another team's database password.
		dbRoot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "db-root"}, Data: map[string][]byte{"password": []byte("not-for-the-operator")}}
		if err := c.Create(ctx, dbRoot); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		err := as.Get(ctx, client.ObjectKeyFromObject(dbRoot), &corev1.Secret{})
		switch want := slices.Contains(readable, namespace) || slices.Contains(readable, ""); {
		case want && err != nil:
			t.Errorf("the operator's ServiceAccount reading Secret %s/db-root: %v, want it read", namespace, err)
		case !want && !apierrors.IsForbidden(err):
			t.Errorf("the operator's ServiceAccount reading Secret %s/db-root: %v, want forbidden", namespace, err)
		}
	}
	for _, namespace := range namespaces {
		if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace)); !apierrors.IsForbidden(err) {
			t.Errorf("the operator's ServiceAccount listing Secrets in %q: %v, want forbidden", namespace, err)
		}
	}
}

// startAPIServer starts kube-apiserver and etcd from $KUBEBUILDER_ASSETS.
func startAPIServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=\"$(bash hack/envtest.sh)\" (builds kube-apiserver and etcd once)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("while starting the envtest API server from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("while stopping the envtest API server: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("while creating a client: %v", err)
	}
	return cfg, c
}

func createNamespaces(t *testing.T, c client.Client, names ...string) {
	t.Helper()
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("while creating namespace %s: %v", name, err)
		}
	}
}

// createRestrictedNamespace creates a namespace whose pods must meet the "restricted" Pod
// Security Standard, enforced by the API server's PodSecurity admission.
func createRestrictedNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatalf("while creating namespace %s: %v", name, err)
	}
}

// dryRunPod submits the pod a Deployment would create, with server-side dry-run: PodSecurity
// enforces on pods, not on their controllers.
func dryRunPod(ctx context.Context, c client.Client, namespace string, deploy *unstructured.Unstructured) error {
	spec, ok, err := unstructured.NestedMap(deploy.Object, "spec", "template", "spec")
	if err != nil || !ok {
		return fmt.Errorf("deployment %s has no pod template (%v)", deploy.GetName(), err)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": deploy.GetName(), "namespace": namespace},
		"spec":       spec,
	}}
	return c.Create(ctx, pod, client.DryRunAll)
}

// applyAll server-side applies objects in order, CRDs first; with client.DryRunAll the API
// server validates and admits each object without storing it.
func applyAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured, opts ...client.ApplyOption) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	for _, err := range applyObjects(t.Context(), c, objs, opts...) {
		t.Error(err)
	}
}

func applyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts ...client.ApplyOption) []error {
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b *unstructured.Unstructured) int {
		return rank(a) - rank(b)
	})
	opts = append(opts, client.FieldOwner(fieldOwner), client.ForceOwnership)
	var errs []error
	for _, o := range ordered {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			errs = append(errs, fmt.Errorf("while applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
		}
	}
	return errs
}

func rank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	default:
		return 2
	}
}

// kustomizeBuild is `kustomize build dir`, with the kustomize library kubectl embeds.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "kustomization.yaml")); err != nil {
		t.Fatalf("%s has no kustomization.yaml: %v", dir, err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("while building %s: %v", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatalf("while encoding %s: %v", dir, err)
	}
	objs, err := decodeObjects(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("while decoding %s: %v", dir, err)
	}
	return objs
}

// rbacRule is one group/resource of config/rbac/role.yaml with the verbs granted on it.
type rbacRule struct {
	group, resource string
	verbs           []string
}

// declaredRules reads config/rbac/role.yaml, the rules controller-gen collected from the
// controllers' +kubebuilder:rbac markers, i.e. what the controller says it needs: the
// manager's ClusterRole and the Secret reader's.
func declaredRules(t *testing.T) []rbacRule {
	t.Helper()
	var out []rbacRule
	for _, role := range generatedRoles(t) {
		out = append(out, roleRules(t, role)...)
	}
	if len(out) == 0 {
		t.Fatal("config/rbac/role.yaml declares no rules")
	}
	return out
}

// roleRules lists a (Cluster)Role's rules by group and resource.
func roleRules(t *testing.T, role *unstructured.Unstructured) []rbacRule {
	t.Helper()
	var out []rbacRule
	for _, r := range field(t, role, "rules").([]any) {
		rule := r.(map[string]any)
		for _, g := range stringList(rule["apiGroups"]) {
			for _, res := range stringList(rule["resources"]) {
				out = append(out, rbacRule{group: g, resource: res, verbs: stringList(rule["verbs"])})
			}
		}
	}
	return out
}

// generatedRoles reads config/rbac/role.yaml by role name: controller-gen writes one
// ClusterRole per roleName of the markers, the manager's and the Secret reader's.
func generatedRoles(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	path := configPath(repoRoot(t), "RBAC_ROLE", "config/rbac/role.yaml")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := decodeObjects(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	roles := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" || roles[o.GetName()] != nil {
			t.Fatalf("%s holds a %s %q (twice?), want ClusterRoles", path, o.GetKind(), o.GetName())
		}
		roles[o.GetName()] = o
	}
	for _, name := range []string{managerRoleName, secretReaderRoleName} {
		if roles[name] == nil {
			t.Fatalf("%s has no ClusterRole %s; run make manifests", path, name)
		}
	}
	if len(roles) != 2 {
		t.Fatalf("%s holds %d ClusterRoles, want %s and %s (hack/sync-chart.sh and the chart know only those)", path, len(roles), managerRoleName, secretReaderRoleName)
	}
	return roles
}

// The ClusterRoles of config/rbac/role.yaml (the roleNames of the +kubebuilder:rbac markers).
const (
	managerRoleName      = "kafka-mirror-manager"
	secretReaderRoleName = "kafka-mirror-secret-reader"
)

// checkAccess asserts that user may do every declared verb in namespace ("" is every
// namespace) and none of the other common verbs on the same resources.
func checkAccess(ctx context.Context, t *testing.T, c client.Client, user serviceAccount, namespace string, rules []rbacRule) {
	t.Helper()
	granted := map[string][]string{}
	for _, r := range rules {
		key := r.group + "/" + r.resource
		granted[key] = append(granted[key], r.verbs...)
	}
	checked := 0
	for _, r := range rules {
		for _, verb := range allVerbs {
			want := slices.Contains(granted[r.group+"/"+r.resource], verb)
			if got := allowed(ctx, t, c, user, namespace, r.group, r.resource, verb); got != want {
				t.Errorf("%s may %s %s.%s in %q: %v, want %v (config/rbac/role.yaml)", user.name, verb, r.resource, r.group, namespace, got, want)
			}
			checked++
		}
	}
	t.Logf("checked %d verb/resource pairs for %s in namespace %q", checked, user.name, namespace)
}

// checkLeaderElection asserts the operator can hold its Lease in its own namespace only.
func checkLeaderElection(ctx context.Context, t *testing.T, c client.Client, user serviceAccount, namespace string) {
	t.Helper()
	for _, verb := range []string{"get", "create", "update"} {
		if !allowed(ctx, t, c, user, namespace, "coordination.k8s.io", "leases", verb) {
			t.Errorf("%s may not %s leases in %s: leader election would fail", user.name, verb, namespace)
		}
	}
	if allowed(ctx, t, c, user, "kube-system", "coordination.k8s.io", "leases", "update") {
		t.Errorf("%s may update leases in kube-system", user.name)
	}
}

type serviceAccount struct {
	name      string
	namespace string
}

func serviceAccountUser(namespace, name string) serviceAccount {
	return serviceAccount{name: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name), namespace: namespace}
}

// waitForRBAC waits until the authorizer sees the bindings just applied: RBAC objects are
// authorised from an informer cache, so a fresh binding may not count for a moment.
func waitForRBAC(ctx context.Context, t *testing.T, c client.Client, user serviceAccount, namespace string, r rbacRule) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !allowed(ctx, t, c, user, namespace, r.group, r.resource, r.verbs[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still may not %s %s in %q 10s after the chart's RBAC was applied", user.name, r.verbs[0], r.resource, namespace)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// allowed asks the API server's authorizer through a SubjectAccessReview, with the groups
// a ServiceAccount token carries.
func allowed(ctx context.Context, t *testing.T, c client.Client, user serviceAccount, namespace, group, resource, verb string) bool {
	t.Helper()
	resource, subresource, _ := strings.Cut(resource, "/")
	review := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user.name,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + user.namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: group, Resource: resource, Subresource: subresource,
			},
		},
	}
	if err := c.Create(ctx, review); err != nil {
		t.Fatalf("while creating a SubjectAccessReview: %v", err)
	}
	return review.Status.Allowed
}
