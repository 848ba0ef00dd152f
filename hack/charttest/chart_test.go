package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	release          = "km"
	releaseNamespace = "kafka-mirror-system"
	fullname         = "km-kafka-mirror-operator"
)

// chartMeta reads the chart's version and appVersion, which labels and image tags carry.
func chartMeta(t *testing.T) (version, appVersion string) {
	t.Helper()
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir(t), "Chart.yaml"))), &c); err != nil {
		t.Fatalf("while reading Chart.yaml: %v", err)
	}
	if c.Version == "" || c.AppVersion == "" {
		t.Fatalf("Chart.yaml needs version and appVersion, got %+v", c)
	}
	return c.Version, c.AppVersion
}

func TestHelmLint(t *testing.T) {
	tests := map[string][]string{
		"default values": nil,
		"namespaced, monitored, highly available": {
			"watchNamespace=team-a", "replicaCount=2", "podDisruptionBudget.enabled=true",
			"metrics.serviceMonitor.enabled=true", "metrics.mirrorServiceMonitor.enabled=true",
		},
		"no CRDs, no RBAC, existing ServiceAccount": {
			"crds.enabled=false", "rbac.create=false", "rbac.aggregatedRoles.enabled=false",
			"serviceAccount.create=false", "serviceAccount.name=mirror-operator",
		},
	}
	for name, set := range tests {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartPath}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint output:\n%s", out)
			}
		})
	}
}

// TestChartDefaults checks what `helm install` with no values creates: every object, the
// operator's pod hardening, its RBAC and the CRD kept on uninstall.
func TestChartDefaults(t *testing.T) {
	version, appVersion := chartMeta(t)
	objs := renderChart(t, release, releaseNamespace)

	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := []string{
		"ServiceAccount/" + fullname,
		"CustomResourceDefinition/kafkamirrors.kafkamirror.io",
		"ClusterRole/kafkamirror-view",
		"ClusterRole/kafkamirror-edit",
		"ClusterRole/" + fullname + "-manager",
		"ClusterRoleBinding/" + fullname + "-manager",
		"ClusterRole/" + fullname + "-metrics-auth",
		"ClusterRoleBinding/" + fullname + "-metrics-auth",
		"ClusterRole/" + fullname + "-metrics-reader",
		"Role/" + fullname + "-secret-reader",
		"RoleBinding/" + fullname + "-secret-reader",
		"Role/" + fullname + "-leader-election",
		"RoleBinding/" + fullname + "-leader-election",
		"Service/" + fullname + "-metrics",
		"Deployment/" + fullname,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
	}

	wantLabels := map[string]string{
		"app.kubernetes.io/name":       "kafka-mirror-operator",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    appVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "kafka-mirror-operator-" + version,
	}
	for _, o := range objs {
		for k, v := range wantLabels {
			if o.GetLabels()[k] != v {
				t.Errorf("%s/%s label %s = %q, want %q", o.GetKind(), o.GetName(), k, o.GetLabels()[k], v)
			}
		}
		if o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetKind(), "Cluster") && o.GetNamespace() != releaseNamespace {
			t.Errorf("%s/%s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), releaseNamespace)
		}
	}

	crd := one(t, objs, "CustomResourceDefinition", "kafkamirrors.kafkamirror.io")
	if got := crd.GetAnnotations()["helm.sh/resource-policy"]; got != "keep" {
		t.Errorf("CRD helm.sh/resource-policy = %q, want keep", got)
	}

	deploy := one(t, objs, "Deployment", fullname)
	if got := field(t, deploy, "spec", "replicas"); got != int64(1) {
		t.Errorf("replicas = %v, want 1", got)
	}
	if got := field(t, deploy, "spec", "template", "spec", "serviceAccountName"); got != fullname {
		t.Errorf("serviceAccountName = %v, want %s", got, fullname)
	}
	podSC := field(t, deploy, "spec", "template", "spec", "securityContext").(map[string]any)
	wantPodSC := map[string]any{
		"runAsNonRoot": true, "runAsUser": int64(65532), "runAsGroup": int64(65532),
		"seccompProfile": map[string]any{"type": "RuntimeDefault"},
	}
	if !reflect.DeepEqual(podSC, wantPodSC) {
		t.Errorf("pod securityContext = %v, want %v", podSC, wantPodSC)
	}
	c := managerContainer(t, deploy)
	wantSC := map[string]any{
		"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
		"capabilities": map[string]any{"drop": []any{"ALL"}},
	}
	if !reflect.DeepEqual(c["securityContext"], wantSC) {
		t.Errorf("container securityContext = %v, want %v", c["securityContext"], wantSC)
	}
	image := "ghcr.io/kafka-mirror/kafka-mirror:" + appVersion
	if c["image"] != image {
		t.Errorf("image = %v, want %s", c["image"], image)
	}
	args := stringList(c["args"])
	for _, want := range []string{
		"manager", "--leader-elect=true", "--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081", "--engine-image=" + image,
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if args[0] != "manager" {
		t.Errorf("first arg = %q, want the manager subcommand", args[0])
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--watch-namespace") {
			t.Errorf("args %v restrict the watch although watchNamespace is empty", args)
		}
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		p, _ := c[probe].(map[string]any)
		get, _ := p["httpGet"].(map[string]any)
		if get["path"] != path || get["port"] != "health" {
			t.Errorf("%s = %v, want GET %s on port health", probe, p, path)
		}
	}
	res, _ := c["resources"].(map[string]any)
	if limits, _ := res["limits"].(map[string]any); limits["memory"] == nil {
		t.Errorf("resources = %v, want a memory limit", res)
	}

	// Least privilege by default: Secrets only in the operator's own namespace, and no
	// ClusterRole of the chart grants anything on Secrets.
	checkSecretReader(t, objs, releaseNamespace)
	checkNoClusterRoleGrantsSecrets(t, objs)

	binding := one(t, objs, "ClusterRoleBinding", fullname+"-manager")
	wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": fullname, "namespace": releaseNamespace}}
	if got := field(t, binding, "subjects"); !reflect.DeepEqual(got, wantSubjects) {
		t.Errorf("ClusterRoleBinding subjects = %v, want %v", got, wantSubjects)
	}
	if got := field(t, binding, "roleRef", "name"); got != fullname+"-manager" {
		t.Errorf("ClusterRoleBinding roleRef = %v", got)
	}

	svc := one(t, objs, "Service", fullname+"-metrics")
	if got, want := field(t, svc, "spec", "selector"), field(t, deploy, "spec", "selector", "matchLabels"); !reflect.DeepEqual(got, want) {
		t.Errorf("metrics Service selector %v does not select the operator pods %v", got, want)
	}
	if got := field(t, svc, "spec", "ports").([]any)[0].(map[string]any)["targetPort"]; got != "metrics" {
		t.Errorf("metrics Service targetPort = %v, want metrics", got)
	}

	for name, want := range map[string]struct {
		labels []string
		verbs  map[string][]string
	}{
		"kafkamirror-view": {
			labels: []string{"rbac.authorization.k8s.io/aggregate-to-view"},
			verbs:  map[string][]string{"kafkamirrors": {"get", "list", "watch"}, "kafkamirrors/scale": {"get"}},
		},
		"kafkamirror-edit": {
			labels: []string{"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"},
			verbs: map[string][]string{
				"kafkamirrors":       {"create", "delete", "get", "list", "patch", "update", "watch"},
				"kafkamirrors/scale": {"get", "patch", "update"},
			},
		},
	} {
		role := one(t, objs, "ClusterRole", name)
		for _, l := range want.labels {
			if role.GetLabels()[l] != "true" {
				t.Errorf("%s lacks label %s=true", name, l)
			}
		}
		granted := grantedVerbs(t, role)
		for resource, verbs := range want.verbs {
			for _, v := range verbs {
				if !slices.Contains(granted["kafkamirror.io/"+resource], v) {
					t.Errorf("%s does not grant %s on %s (grants %v)", name, v, resource, granted)
				}
			}
		}
		for resource := range granted {
			if !strings.HasPrefix(resource, "kafkamirror.io/") {
				t.Errorf("%s grants %s; it should cover KafkaMirrors only", name, resource)
			}
		}
	}
}

// grantedVerbs flattens a role's rules to "group/resource" -> verbs.
func grantedVerbs(t *testing.T, role *unstructured.Unstructured) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range field(t, role, "rules").([]any) {
		rule := r.(map[string]any)
		for _, g := range stringList(rule["apiGroups"]) {
			for _, res := range stringList(rule["resources"]) {
				out[g+"/"+res] = append(out[g+"/"+res], stringList(rule["verbs"])...)
			}
		}
	}
	return out
}

// TestChartValues checks that non-default values change what they promise and nothing else
// that matters.
func TestChartValues(t *testing.T) {
	_, appVersion := chartMeta(t)
	tests := map[string]struct {
		set   []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		"watchNamespace grants the manager rules in those namespaces only": {
			set: []string{`watchNamespace=team-a\,team-b`},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				var roleNamespaces, bindingNamespaces []string
				for _, role := range find(objs, "Role") {
					if role.GetName() == fullname+"-manager" {
						roleNamespaces = append(roleNamespaces, role.GetNamespace())
					}
				}
				for _, binding := range find(objs, "RoleBinding") {
					if binding.GetName() != fullname+"-manager" {
						continue
					}
					bindingNamespaces = append(bindingNamespaces, binding.GetNamespace())
					if got := field(t, binding, "subjects").([]any)[0].(map[string]any)["namespace"]; got != releaseNamespace {
						t.Errorf("RoleBinding subject namespace = %v, want the release namespace %s", got, releaseNamespace)
					}
				}
				if want := []string{"team-a", "team-b"}; !slices.Equal(roleNamespaces, want) || !slices.Equal(bindingNamespaces, want) {
					t.Errorf("manager Roles in %v, RoleBindings in %v; want both in %v", roleNamespaces, bindingNamespaces, want)
				}
				// TokenReviews and SubjectAccessReviews (for the HTTPS metrics) are
				// cluster-scoped: that ClusterRole is the only one a namespaced install binds.
				for _, crb := range find(objs, "ClusterRoleBinding") {
					if crb.GetName() != fullname+"-metrics-auth" {
						t.Errorf("a namespaced install binds ClusterRoleBinding %s; only the metrics-auth one is expected", crb.GetName())
					}
				}
				for _, cr := range find(objs, "ClusterRole") {
					if name := cr.GetName(); name != "kafkamirror-view" && name != "kafkamirror-edit" &&
						name != fullname+"-metrics-auth" && name != fullname+"-metrics-reader" {
						t.Errorf("unexpected ClusterRole %s in a namespaced install", cr.GetName())
					}
				}
				args := stringList(managerContainer(t, one(t, objs, "Deployment", fullname))["args"])
				if !slices.Contains(args, "--watch-namespace=team-a,team-b") {
					t.Errorf("args %v lack --watch-namespace=team-a,team-b", args)
				}
			},
		},
		"watchNamespace grants Secret get in those namespaces and the release's only": {
			set: []string{`watchNamespace=team-a\,team-b`},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				checkSecretReader(t, objs, releaseNamespace, "team-a", "team-b")
			},
		},
		"rbac.secretNamespaces grants Secret get in those namespaces and the release's only": {
			set: []string{"rbac.secretNamespaces={team-e,team-f}"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				checkSecretReader(t, objs, releaseNamespace, "team-e", "team-f")
				checkNoClusterRoleGrantsSecrets(t, objs)
				// The other rules stay cluster-wide: the operator serves every namespace.
				one(t, objs, "ClusterRoleBinding", fullname+"-manager")
			},
		},
		"rbac.secretNamespaces naming the release namespace: one Role there": {
			set: []string{"rbac.secretNamespaces={team-e," + releaseNamespace + "}"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				checkSecretReader(t, objs, releaseNamespace, "team-e")
			},
		},
		"rbac.secretNamespaces wins over watchNamespace": {
			set: []string{`watchNamespace=team-a\,team-b`, "rbac.secretNamespaces={team-b}"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				checkSecretReader(t, objs, releaseNamespace, "team-b")
			},
		},
		`rbac.secretNamespaces=["*"] opts in to Secret get in every namespace`: {
			set: []string{`rbac.secretNamespaces={*}`},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				role := one(t, objs, "ClusterRole", fullname+"-secret-reader")
				want := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}}
				if rules := field(t, role, "rules"); !reflect.DeepEqual(rules, want) {
					t.Errorf("Secret reader ClusterRole rules %v, want only %v", rules, want)
				}
				binding := one(t, objs, "ClusterRoleBinding", fullname+"-secret-reader")
				wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": fullname, "namespace": releaseNamespace}}
				if got := field(t, binding, "subjects"); !reflect.DeepEqual(got, wantSubjects) {
					t.Errorf("Secret reader ClusterRoleBinding subjects = %v, want %v", got, wantSubjects)
				}
				for _, kind := range []string{"Role", "RoleBinding"} {
					for _, o := range find(objs, kind) {
						if o.GetName() == fullname+"-secret-reader" {
							t.Errorf("%s %s/%s rendered besides the cluster-wide Secret reader", kind, o.GetNamespace(), o.GetName())
						}
					}
				}
			},
		},
		"crds.keep=false lets helm uninstall delete the CRD": {
			set: []string{"crds.keep=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				crd := one(t, objs, "CustomResourceDefinition", "kafkamirrors.kafkamirror.io")
				if v, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
					t.Errorf("CRD has helm.sh/resource-policy=%q with crds.keep=false", v)
				}
			},
		},
		"mirrors ServiceMonitor scrapes each watched namespace": {
			set: []string{"metrics.mirrorServiceMonitor.enabled=true", `watchNamespace=team-a\,team-b`},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				mirrors := one(t, objs, "ServiceMonitor", fullname+"-mirrors")
				want := map[string]any{"matchNames": []any{"team-a", "team-b"}}
				if got := field(t, mirrors, "spec", "namespaceSelector"); !reflect.DeepEqual(got, want) {
					t.Errorf("mirrors ServiceMonitor namespaceSelector = %v, want %v", got, want)
				}
			},
		},
		"pinUserID=false leaves the user IDs to the platform (OpenShift)": {
			set: []string{"pinUserID=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				deploy := one(t, objs, "Deployment", fullname)
				want := map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}
				if got := field(t, deploy, "spec", "template", "spec", "securityContext"); !reflect.DeepEqual(got, want) {
					t.Errorf("operator pod securityContext = %v, want %v", got, want)
				}
				if args := stringList(managerContainer(t, deploy)["args"]); !slices.Contains(args, "--pin-user-id=false") {
					t.Errorf("args %v lack --pin-user-id=false: the mirror pods would still pin their IDs", args)
				}
			},
		},
		"crds.enabled=false leaves the CRD out": {
			set: []string{"crds.enabled=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if n := len(find(objs, "CustomResourceDefinition")); n != 0 {
					t.Errorf("rendered %d CRDs with crds.enabled=false", n)
				}
			},
		},
		"monitoring and disruption budget": {
			set: []string{
				"replicaCount=2", "podDisruptionBudget.enabled=true", "metrics.serviceMonitor.enabled=true",
				"metrics.serviceMonitor.labels.release=prometheus", "metrics.mirrorServiceMonitor.enabled=true",
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := field(t, one(t, objs, "Deployment", fullname), "spec", "replicas"); got != int64(2) {
					t.Errorf("replicas = %v, want 2", got)
				}
				pdb := one(t, objs, "PodDisruptionBudget", fullname)
				if got := field(t, pdb, "spec", "minAvailable"); got != int64(1) {
					t.Errorf("PDB minAvailable = %v, want 1", got)
				}
				sm := one(t, objs, "ServiceMonitor", fullname)
				if sm.GetLabels()["release"] != "prometheus" {
					t.Errorf("ServiceMonitor labels = %v, want release=prometheus", sm.GetLabels())
				}
				svc := one(t, objs, "Service", fullname+"-metrics")
				if got := field(t, sm, "spec", "selector", "matchLabels").(map[string]any); !selects(got, svc.GetLabels()) {
					t.Errorf("ServiceMonitor selector %v does not select the metrics Service %v", got, svc.GetLabels())
				}
				mirrors := one(t, objs, "ServiceMonitor", fullname+"-mirrors")
				wantSel := map[string]any{"app.kubernetes.io/name": "kafka-mirror", "app.kubernetes.io/component": "mirror"}
				if got := field(t, mirrors, "spec", "selector", "matchLabels"); !reflect.DeepEqual(got, wantSel) {
					t.Errorf("mirrors ServiceMonitor selector = %v, want %v (the labels controllers/names.go puts on mirror Services)", got, wantSel)
				}
				if got := field(t, mirrors, "spec", "namespaceSelector"); !reflect.DeepEqual(got, map[string]any{"any": true}) {
					t.Errorf("mirrors ServiceMonitor namespaceSelector = %v, want any", got)
				}
			},
		},
		"image digest and a separate engine image": {
			set: []string{
				"image.digest=sha256:" + strings.Repeat("ab", 32), "engineImage=registry.example/kafka-mirror:1.2.3",
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				c := managerContainer(t, one(t, objs, "Deployment", fullname))
				if want := "ghcr.io/kafka-mirror/kafka-mirror@sha256:" + strings.Repeat("ab", 32); c["image"] != want {
					t.Errorf("image = %v, want %s", c["image"], want)
				}
				if args := stringList(c["args"]); !slices.Contains(args, "--engine-image=registry.example/kafka-mirror:1.2.3") {
					t.Errorf("args %v lack the engine image override", args)
				}
			},
		},
		"leader election off": {
			set: []string{"leaderElection.enabled=false"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := stringList(managerContainer(t, one(t, objs, "Deployment", fullname))["args"]); !slices.Contains(args, "--leader-elect=false") {
					t.Errorf("args %v lack --leader-elect=false", args)
				}
				for _, r := range find(objs, "Role") {
					if strings.HasSuffix(r.GetName(), "-leader-election") {
						t.Errorf("leader-election Role %s rendered with leader election off", r.GetName())
					}
				}
			},
		},
		"existing ServiceAccount, RBAC managed elsewhere": {
			set: []string{
				"serviceAccount.create=false", "serviceAccount.name=mirror-operator", "rbac.create=false",
				"rbac.aggregatedRoles.enabled=false",
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
					if n := len(find(objs, kind)); n != 0 {
						t.Errorf("rendered %d %s objects; want none", n, kind)
					}
				}
				if got := field(t, one(t, objs, "Deployment", fullname), "spec", "template", "spec", "serviceAccountName"); got != "mirror-operator" {
					t.Errorf("serviceAccountName = %v, want mirror-operator", got)
				}
			},
		},
		"tag and extra args": {
			set: []string{"image.tag=9.9.9", "extraArgs={--log-level=debug}", "logFormat=console"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				deploy := one(t, objs, "Deployment", fullname)
				c := managerContainer(t, deploy)
				if c["image"] != "ghcr.io/kafka-mirror/kafka-mirror:9.9.9" {
					t.Errorf("image = %v, want tag 9.9.9 instead of %s", c["image"], appVersion)
				}
				args := stringList(c["args"])
				if args[len(args)-1] != "--log-level=debug" || !slices.Contains(args, "--log-format=console") {
					t.Errorf("args %v: want --log-format=console and --log-level=debug last (the last flag wins)", args)
				}
				if deploy.GetLabels()["app.kubernetes.io/version"] != "9.9.9" {
					t.Errorf("version label = %q, want 9.9.9", deploy.GetLabels()["app.kubernetes.io/version"])
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.check(t, renderChart(t, release, releaseNamespace, tc.set...))
		})
	}
}

func selects(selector map[string]any, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestChartRefusesMixedSecretNamespaces: "*" (every namespace) together with namespace
// names is a mistake whichever was meant; the install fails and says why.
func TestChartRefusesMixedSecretNamespaces(t *testing.T) {
	_, err := runHelm(t, "template", release, chartPath, "--namespace", releaseNamespace, "--set", "rbac.secretNamespaces={team-a,*}")
	want := `rbac.secretNamespaces: "*" (Secrets in every namespace) cannot be combined with namespace names`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("helm template with rbac.secretNamespaces={team-a,*}: %v, want an error containing %q", err, want)
	}
}

// TestChartSchemaRejectsBadValues checks that values.schema.json turns typos and wrong types
// into an install error that names the value, instead of a silently ignored setting.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	tests := map[string]struct {
		set  string
		want string
	}{
		"unknown top-level key":           {set: "replicas=2", want: "additional properties 'replicas' not allowed"},
		"unknown nested key":              {set: "crds.install=true", want: "at '/crds': additional properties 'install' not allowed"},
		"Kubernetes objects pass through": {set: "securityContext.runAsUser=0", want: ""},
		"string for an integer":           {set: "replicaCount=two", want: "at '/replicaCount': got string, want integer"},
		"string for a boolean":            {set: "crds.keep=yes", want: "at '/crds/keep': got string, want boolean"},
		"unknown log level":               {set: "logLevel=verbose", want: "at '/logLevel': value must be one of 'debug', 'info', 'warn', 'error'"},
		"invalid namespace name":          {set: "watchNamespace=Team_A", want: "at '/watchNamespace': 'Team_A' does not match pattern"},
		"namespace list with a space":     {set: "watchNamespace=a\\, b", want: "at '/watchNamespace': 'a, b' does not match pattern"},
		"port out of range":               {set: "metrics.port=70000", want: "at '/metrics/port': maximum: got 70,000, want 65,535"},
		"bad pull policy":                 {set: "image.pullPolicy=Sometimes", want: "at '/image/pullPolicy': value must be one of"},
		"bootstrap pattern without port":  {set: "allowedBootstrapServers={kafka.svc}", want: "at '/allowedBootstrapServers/0': 'kafka.svc' does not match pattern"},
		"bootstrap pattern with a quote":  {set: "allowedBootstrapServers={k'a:9092}", want: "at '/allowedBootstrapServers/0'"},
		"unknown admission action":        {set: "admissionPolicy.validationActions={Reject}", want: "at '/admissionPolicy/validationActions/0': value must be one of"},
		"unknown network policy key":      {set: "networkPolicy.operator.ingress=x", want: "at '/networkPolicy/operator': additional properties 'ingress' not allowed"},
		"string for metrics.secure":       {set: "metrics.secure=no", want: "at '/metrics/secure': got string, want boolean"},
		"Kafka port out of range":         {set: "networkPolicy.kafkaPorts={0}", want: "at '/networkPolicy/kafkaPorts/0': minimum"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := runHelm(t, "template", release, chartPath, "--namespace", releaseNamespace, "--set", tc.set)
			if tc.want == "" {
				// securityContext is a Kubernetes SecurityContext passed through as it is;
				// the API server validates it, so the schema accepts any object there.
				if err != nil {
					t.Fatalf("helm template --set %s failed: %v", tc.set, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want a schema error containing %q", tc.set, tc.want)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant a schema error containing %q", err, tc.want)
			}
		})
	}
}

// TestChartMatchesConfig fails when the chart's generated CRDs or RBAC rules differ from what
// controller-gen wrote into config/: `make manifests` regenerates both.
func TestChartMatchesConfig(t *testing.T) {
	root := repoRoot(t)
	t.Run("sync-chart.sh --check", func(t *testing.T) {
		cmd := exec.Command("bash", filepath.Join(root, "hack", "sync-chart.sh"), "--check")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	// The script's output, rendered by helm, must also mean the same objects as config/:
	// this catches a transformation that keeps the files in step but changes their content.
	objs := renderChart(t, release, releaseNamespace)
	t.Run("CRDs", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(configPath(root, "CRD_DIR", "config/crd/bases"), "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in config/crd/bases (%v): run make manifests", err)
		}
		rendered := find(objs, "CustomResourceDefinition")
		if len(rendered) != len(files) {
			t.Errorf("chart renders %d CRDs, config/crd/bases holds %d", len(rendered), len(files))
		}
		for _, f := range files {
			want := readObject(t, f)
			got := one(t, objs, "CustomResourceDefinition", want.GetName()).DeepCopy()
			// The chart adds its labels and the keep policy; everything else is config/'s.
			got.SetLabels(nil)
			ann := got.GetAnnotations()
			delete(ann, "helm.sh/resource-policy")
			got.SetAnnotations(ann)
			if !reflect.DeepEqual(got.Object, want.Object) {
				t.Errorf("chart CRD %s differs from %s", want.GetName(), f)
			}
		}
	})
	t.Run("RBAC rules", func(t *testing.T) {
		rolePath := configPath(root, "RBAC_ROLE", "config/rbac/role.yaml")
		rbacDir := filepath.Dir(rolePath)
		generated := generatedRoles(t)
		namespaced := renderChart(t, release, releaseNamespace, "watchNamespace=team-a")
		for name, c := range map[string]struct {
			file     string
			want     *unstructured.Unstructured // nil: the one object in file
			rendered *unstructured.Unstructured
		}{
			"manager ClusterRole": {rolePath, generated[managerRoleName], one(t, objs, "ClusterRole", fullname+"-manager")},
			"namespaced manager":  {rolePath, generated[managerRoleName], one(t, namespaced, "Role", fullname+"-manager")},
			"Secret reader":       {rolePath, generated[secretReaderRoleName], one(t, objs, "Role", fullname+"-secret-reader")},
			"cluster-wide Secret reader": {rolePath, generated[secretReaderRoleName],
				one(t, renderChart(t, release, releaseNamespace, "rbac.secretNamespaces={*}"), "ClusterRole", fullname+"-secret-reader")},
			"leader-election Role": {filepath.Join(rbacDir, "leader_election_role.yaml"), nil, one(t, objs, "Role", fullname+"-leader-election")},
			"kafkamirror-view":     {filepath.Join(rbacDir, "kafkamirror_viewer_role.yaml"), nil, one(t, objs, "ClusterRole", "kafkamirror-view")},
			"kafkamirror-edit":     {filepath.Join(rbacDir, "kafkamirror_editor_role.yaml"), nil, one(t, objs, "ClusterRole", "kafkamirror-edit")},
			"metrics-auth":         {filepath.Join(rbacDir, "metrics_auth_role.yaml"), nil, one(t, objs, "ClusterRole", fullname+"-metrics-auth")},
			"metrics-reader":       {filepath.Join(rbacDir, "metrics_reader_role.yaml"), nil, one(t, objs, "ClusterRole", fullname+"-metrics-reader")},
		} {
			want := c.want
			if want == nil {
				want = readObject(t, c.file)
			}
			if got := field(t, c.rendered, "rules"); !reflect.DeepEqual(got, field(t, want, "rules")) {
				t.Errorf("chart %s rules differ from %s:\n got %v\nwant %v", name, c.file, got, want.Object["rules"])
			}
		}
	})
}

// TestKustomizeSecretsInOwnNamespace: config/default, like the chart's defaults, lets the
// operator get Secrets in its own namespace only (a RoleBinding to the generated
// kafka-mirror-secret-reader ClusterRole), and no ClusterRoleBinding grants Secrets.
func TestKustomizeSecretsInOwnNamespace(t *testing.T) {
	objs := kustomizeBuild(t, filepath.Join(repoRoot(t), "config", "default"))
	const namespace = "kafka-mirror-system"
	secretRoles := map[string]bool{}
	for _, role := range find(objs, "ClusterRole") {
		rules, _ := role.Object["rules"].([]any)
		for _, r := range rules {
			resources, _ := r.(map[string]any)["resources"].([]any)
			if slices.Contains(resources, any("secrets")) || slices.Contains(resources, any("*")) {
				secretRoles[role.GetName()] = true
			}
		}
	}
	if len(secretRoles) != 1 || !secretRoles["kafka-mirror-secret-reader"] {
		t.Errorf("ClusterRoles granting Secrets: %v, want only the generated kafka-mirror-secret-reader", secretRoles)
	}
	for _, crb := range find(objs, "ClusterRoleBinding") {
		if name := field(t, crb, "roleRef", "name").(string); secretRoles[name] {
			t.Errorf("ClusterRoleBinding %s binds %s cluster-wide: Secrets must be granted per namespace", crb.GetName(), name)
		}
	}
	var bound []string
	for _, rb := range find(objs, "RoleBinding") {
		if name := field(t, rb, "roleRef", "name").(string); secretRoles[name] {
			bound = append(bound, rb.GetNamespace())
			subjects := field(t, rb, "subjects").([]any)
			if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != namespace {
				t.Errorf("RoleBinding %s/%s binds %v, want the operator's ServiceAccount in %s", rb.GetNamespace(), rb.GetName(), subjects, namespace)
			}
		}
	}
	if !slices.Equal(bound, []string{namespace}) {
		t.Errorf("the Secret reader is bound by RoleBindings in %v, want in %s only", bound, namespace)
	}
}

// configPath is a path under config/, or the override hack/sync-chart.sh also honours
// (used while developing the chart before the operator's manifests exist).
func configPath(root, env, rel string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// readObject reads a file holding exactly one object.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := decodeObjects(f)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: want one object, got %d (%v)", path, len(objs), err)
	}
	return objs[0]
}

// checkNoClusterRoleGrantsSecrets asserts that no ClusterRole in objs grants anything on
// Secrets (by resource name or a wildcard): Secret access is namespaced unless opted in.
func checkNoClusterRoleGrantsSecrets(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, role := range find(objs, "ClusterRole") {
		rules, _ := role.Object["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			groups, _ := rule["apiGroups"].([]any)
			resources, _ := rule["resources"].([]any)
			if (slices.Contains(groups, any("")) || slices.Contains(groups, any("*"))) &&
				(slices.Contains(resources, any("secrets")) || slices.Contains(resources, any("*"))) {
				t.Errorf("ClusterRole %s has the rule %v: Secrets must be granted per namespace by default", role.GetName(), rule)
			}
		}
		if _, ok := role.Object["aggregationRule"]; ok {
			t.Errorf("ClusterRole %s aggregates other roles; it could collect a Secret rule", role.GetName())
		}
	}
}

// checkSecretReader asserts that objs grant the operator `get` on Secrets through a Role
// and RoleBinding in each of namespaces, and no Secret access cluster-wide.
func checkSecretReader(t *testing.T, objs []*unstructured.Unstructured, namespaces ...string) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		for _, o := range find(objs, kind) {
			if o.GetName() == fullname+"-secret-reader" {
				t.Errorf("%s %s grants Secrets cluster-wide; want Roles in %v only", kind, o.GetName(), namespaces)
			}
		}
	}
	for _, kind := range []string{"Role", "RoleBinding"} {
		var in []string
		for _, o := range find(objs, kind) {
			if o.GetName() == fullname+"-secret-reader" {
				in = append(in, o.GetNamespace())
			}
		}
		if !slices.Equal(in, namespaces) {
			t.Errorf("Secret reader %ss in %v, want %v", kind, in, namespaces)
		}
	}
	for _, role := range find(objs, "Role") {
		if role.GetName() != fullname+"-secret-reader" {
			continue
		}
		want := map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}
		if rules := field(t, role, "rules").([]any); len(rules) != 1 || !reflect.DeepEqual(rules[0], want) {
			t.Errorf("Secret reader Role in %s has rules %v, want only %v", role.GetNamespace(), rules, want)
		}
	}
	for _, binding := range find(objs, "RoleBinding") {
		if binding.GetName() != fullname+"-secret-reader" {
			continue
		}
		if ref := field(t, binding, "roleRef").(map[string]any); ref["kind"] != "Role" || ref["name"] != fullname+"-secret-reader" {
			t.Errorf("Secret reader RoleBinding in %s refers to %v", binding.GetNamespace(), ref)
		}
		subject := field(t, binding, "subjects").([]any)[0].(map[string]any)
		if subject["name"] != fullname || subject["namespace"] != releaseNamespace {
			t.Errorf("Secret reader RoleBinding in %s binds %v, want the operator's ServiceAccount %s/%s", binding.GetNamespace(), subject, releaseNamespace, fullname)
		}
	}
}
