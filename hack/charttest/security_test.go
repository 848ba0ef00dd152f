package charttest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestChartSecurityValues renders the values of docs/security.md's controls: the HTTPS
// metrics (on by default) and its off switch, the bootstrap-server allow-list, the
// ValidatingAdmissionPolicy and the NetworkPolicies (off by default).
func TestChartSecurityValues(t *testing.T) {
	tests := map[string]struct {
		set   []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		"defaults: HTTPS metrics, no allow-list, no policies": {
			set: []string{"metrics.serviceMonitor.enabled=true"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				c := managerContainer(t, one(t, objs, "Deployment", fullname))
				args := stringList(c["args"])
				if !slices.Contains(args, "--metrics-secure=true") {
					t.Errorf("args %v lack --metrics-secure=true", args)
				}
				for _, a := range args {
					if strings.HasPrefix(a, "--allowed-bootstrap-servers") || strings.HasPrefix(a, "--metrics-cert-dir") {
						t.Errorf("default args contain %s", a)
					}
				}
				if _, ok := c["volumeMounts"]; ok {
					t.Errorf("the operator mounts volumes by default: %v", c["volumeMounts"])
				}
				endpoint := field(t, one(t, objs, "ServiceMonitor", fullname), "spec", "endpoints").([]any)[0].(map[string]any)
				want := map[string]any{
					"port": "metrics", "path": "/metrics", "interval": "30s", "scheme": "https",
					"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
					"tlsConfig":       map[string]any{"insecureSkipVerify": true},
				}
				if !reflect.DeepEqual(endpoint, want) {
					t.Errorf("ServiceMonitor endpoint = %v, want %v", endpoint, want)
				}
				for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "NetworkPolicy"} {
					if n := len(find(objs, kind)); n != 0 {
						t.Errorf("rendered %d %s by default; want none", n, kind)
					}
				}
				reader := one(t, objs, "ClusterRole", fullname+"-metrics-reader")
				wantRules := []any{map[string]any{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}
				if got := field(t, reader, "rules"); !reflect.DeepEqual(got, wantRules) {
					t.Errorf("metrics-reader rules = %v, want %v", got, wantRules)
				}
			},
		},
		"metrics.secure=false: plain HTTP, no metrics RBAC": {
			set: []string{"metrics.secure=false", "metrics.serviceMonitor.enabled=true"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := stringList(managerContainer(t, one(t, objs, "Deployment", fullname))["args"]); !slices.Contains(args, "--metrics-secure=false") {
					t.Errorf("args %v lack --metrics-secure=false", args)
				}
				endpoint := field(t, one(t, objs, "ServiceMonitor", fullname), "spec", "endpoints").([]any)[0].(map[string]any)
				for _, k := range []string{"scheme", "bearerTokenFile", "tlsConfig"} {
					if v, ok := endpoint[k]; ok {
						t.Errorf("plain-HTTP ServiceMonitor endpoint has %s=%v", k, v)
					}
				}
				for _, o := range append(find(objs, "ClusterRole"), find(objs, "ClusterRoleBinding")...) {
					if strings.Contains(o.GetName(), "-metrics-") {
						t.Errorf("%s/%s rendered with metrics.secure=false", o.GetKind(), o.GetName())
					}
				}
			},
		},
		"a mounted metrics certificate and a CA for Prometheus": {
			set: []string{"metrics.certSecret=operator-metrics-tls", "metrics.serviceMonitor.enabled=true",
				"metrics.serviceMonitor.tlsConfig.serverName=kafka-mirror-operator-metrics.ops.svc"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				deploy := one(t, objs, "Deployment", fullname)
				c := managerContainer(t, deploy)
				if args := stringList(c["args"]); !slices.Contains(args, "--metrics-cert-dir=/etc/kafka-mirror/metrics-certs") {
					t.Errorf("args %v lack --metrics-cert-dir", args)
				}
				mounts := c["volumeMounts"].([]any)
				if len(mounts) != 1 || mounts[0].(map[string]any)["mountPath"] != "/etc/kafka-mirror/metrics-certs" || mounts[0].(map[string]any)["readOnly"] != true {
					t.Errorf("volumeMounts = %v, want the certificate read-only at /etc/kafka-mirror/metrics-certs", mounts)
				}
				vols := field(t, deploy, "spec", "template", "spec", "volumes").([]any)
				if got := vols[0].(map[string]any)["secret"].(map[string]any)["secretName"]; got != "operator-metrics-tls" {
					t.Errorf("metrics-certs volume Secret = %v, want operator-metrics-tls", got)
				}
				endpoint := field(t, one(t, objs, "ServiceMonitor", fullname), "spec", "endpoints").([]any)[0].(map[string]any)
				if got, want := endpoint["tlsConfig"], map[string]any{"serverName": "kafka-mirror-operator-metrics.ops.svc"}; !reflect.DeepEqual(got, want) {
					t.Errorf("tlsConfig = %v, want %v (and no insecureSkipVerify)", got, want)
				}
			},
		},
		"allow-list with its admission policy, namespaced": {
			set: []string{`allowedBootstrapServers={*.kafka.svc:9092,kafka-*.example.com:*}`, "admissionPolicy.enabled=true",
				`watchNamespace=team-a\,team-b`},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				patterns := []string{"*.kafka.svc:9092", "kafka-*.example.com:*"}
				if args := stringList(managerContainer(t, one(t, objs, "Deployment", fullname))["args"]); !slices.Contains(args, "--allowed-bootstrap-servers="+strings.Join(patterns, ",")) {
					t.Errorf("args %v lack --allowed-bootstrap-servers", args)
				}
				policy := one(t, objs, "ValidatingAdmissionPolicy", fullname+"-bootstrap-servers")
				variable := field(t, policy, "spec", "variables").([]any)[0].(map[string]any)
				// The policy and the operator must judge alike: the same regular expression.
				if want := "r'" + controllers.AllowListRegexp(patterns) + "'"; variable["expression"] != want {
					t.Errorf("policy variable %v = %v, want %s (controllers.AllowListRegexp)", variable["name"], variable["expression"], want)
				}
				binding := one(t, objs, "ValidatingAdmissionPolicyBinding", fullname+"-bootstrap-servers")
				if got := field(t, binding, "spec", "validationActions"); !reflect.DeepEqual(got, []any{"Deny"}) {
					t.Errorf("validationActions = %v, want [Deny]", got)
				}
				values := field(t, binding, "spec", "matchResources", "namespaceSelector", "matchExpressions").([]any)[0].(map[string]any)["values"]
				if !reflect.DeepEqual(values, []any{"team-a", "team-b"}) {
					t.Errorf("binding matches namespaces %v, want the watched team-a, team-b", values)
				}
			},
		},
		"network policies": {
			set: []string{"networkPolicy.operator.enabled=true", "networkPolicy.mirrors.enabled=true", "networkPolicy.mirrors.namespaces={team-a,team-b}",
				"networkPolicy.kafkaPorts={9094}", "networkPolicy.metricsNamespaceSelector.matchLabels.team=monitoring"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				operator := one(t, objs, "NetworkPolicy", fullname)
				if got := field(t, operator, "spec", "podSelector", "matchLabels").(map[string]any); !selects(got, one(t, objs, "Deployment", fullname).GetLabels()) {
					t.Errorf("operator NetworkPolicy selects %v, not the operator's pods", got)
				}
				expectPorts(t, "operator ingress", field(t, operator, "spec", "ingress"), [][]any{{int64(8080)}, {int64(8081)}})
				expectPorts(t, "operator egress", field(t, operator, "spec", "egress"), [][]any{{int64(53), int64(53)}, {int64(443), int64(6443)}, {int64(9094)}})
				metricsFrom := field(t, operator, "spec", "ingress").([]any)[0].(map[string]any)["from"]
				wantFrom := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "monitoring"}}}}
				if !reflect.DeepEqual(metricsFrom, wantFrom) {
					t.Errorf("metrics ingress from %v, want %v", metricsFrom, wantFrom)
				}
				var namespaces []string
				for _, np := range find(objs, "NetworkPolicy") {
					if np.GetName() != fullname+"-mirrors" {
						continue
					}
					namespaces = append(namespaces, np.GetNamespace())
					wantSel := map[string]any{"app.kubernetes.io/name": "kafka-mirror", "app.kubernetes.io/component": "mirror"}
					if got := field(t, np, "spec", "podSelector", "matchLabels"); !reflect.DeepEqual(got, wantSel) {
						t.Errorf("mirror NetworkPolicy selects %v, want %v (controllers/names.go's pod labels)", got, wantSel)
					}
					expectPorts(t, "mirror ingress", field(t, np, "spec", "ingress"), [][]any{{"metrics"}})
					expectPorts(t, "mirror egress", field(t, np, "spec", "egress"), [][]any{{int64(53), int64(53)}, {int64(9094)}})
				}
				if want := []string{"team-a", "team-b"}; !slices.Equal(namespaces, want) {
					t.Errorf("mirror NetworkPolicies in %v, want %v", namespaces, want)
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

// expectPorts checks the ports of each NetworkPolicy rule, in order.
func expectPorts(t *testing.T, what string, rules any, want [][]any) {
	t.Helper()
	var got [][]any
	for _, r := range rules.([]any) {
		var ports []any
		for _, p := range r.(map[string]any)["ports"].([]any) {
			ports = append(ports, p.(map[string]any)["port"])
		}
		got = append(got, ports)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s ports = %v, want %v", what, got, want)
	}
}

func TestChartSecurityValuesNeedTheirInputs(t *testing.T) {
	tests := map[string]struct {
		set  []string
		want string
	}{
		"admission policy without an allow-list": {set: []string{"admissionPolicy.enabled=true"}, want: "admissionPolicy.enabled needs allowedBootstrapServers"},
		"mirror policy without namespaces":       {set: []string{"networkPolicy.mirrors.enabled=true"}, want: "networkPolicy.mirrors.enabled needs networkPolicy.mirrors.namespaces or watchNamespace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", release, chartPath, "--namespace", releaseNamespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			if _, err := runHelm(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template %v: err %v, want one containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// nonResourceAllowed asks the API server whether user may verb the nonResourceURL path.
func nonResourceAllowed(ctx context.Context, t *testing.T, c client.Client, user serviceAccount, path, verb string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user.name,
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + user.namespace, "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	if err := c.Create(ctx, review); err != nil {
		t.Fatalf("while creating a SubjectAccessReview: %v", err)
	}
	return review.Status.Allowed
}

// checkMetricsAuth checks that the operator's ServiceAccount may create the TokenReviews
// and SubjectAccessReviews its HTTPS metrics need, and nothing else on them.
func checkMetricsAuth(ctx context.Context, t *testing.T, c client.Client, sa serviceAccount) {
	t.Helper()
	for _, r := range []struct{ group, resource string }{{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}} {
		if !allowed(ctx, t, c, sa, "", r.group, r.resource, "create") {
			t.Errorf("%s may not create %s.%s: the HTTPS metrics cannot authenticate scrapers", sa.name, r.resource, r.group)
		}
		for _, verb := range []string{"get", "list", "delete"} {
			if allowed(ctx, t, c, sa, "", r.group, r.resource, verb) {
				t.Errorf("%s may %s %s.%s; only create is needed", sa.name, verb, r.resource, r.group)
			}
		}
	}
}

// checkMetricsReader binds the default release's metrics-reader ClusterRole to one
// ServiceAccount and checks, with SubjectAccessReviews, that it may get /metrics and
// another ServiceAccount may not.
func checkMetricsReader(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	scraper, stranger := serviceAccountUser("monitoring", "prometheus"), serviceAccountUser("monitoring", "stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-kafka-mirror-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "monitoring", Name: "prometheus"}},
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if !nonResourceAllowed(ctx, t, c, scraper, "/metrics", "get") {
			return fmt.Errorf("%s bound to %s may not get /metrics", scraper.name, binding.RoleRef.Name)
		}
		return nil
	})
	if nonResourceAllowed(ctx, t, c, stranger, "/metrics", "get") {
		t.Errorf("%s, bound to nothing, may get /metrics", stranger.name)
	}
	if nonResourceAllowed(ctx, t, c, scraper, "/metrics", "post") || nonResourceAllowed(ctx, t, c, scraper, "/healthz/poststarthook", "get") {
		t.Errorf("the metrics-reader role grants more than get /metrics")
	}
}

// checkAdmissionPolicy installs a second release, namespaced to vap-team, with an
// allow-list, its ValidatingAdmissionPolicy and both NetworkPolicies (applied for real,
// so the API server validates them), then creates KafkaMirrors (dry-run) that the policy
// refuses or admits. It needs the CRD, which the default release installed.
func checkAdmissionPolicy(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	createNamespaces(t, c, "vap-ops", "vap-team", "vap-other")
	applyAll(t, c, renderChart(t, "vap", "vap-ops", "watchNamespace=vap-team", "crds.enabled=false", "rbac.aggregatedRoles.enabled=false",
		`allowedBootstrapServers={*.kafka.svc:9092,kafka-*.example.com:*}`, "admissionPolicy.enabled=true",
		"networkPolicy.operator.enabled=true", "networkPolicy.mirrors.enabled=true"))

	mirror := func(namespace, source, target string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kafkamirror.io/v1alpha1", "kind": "KafkaMirror",
			"metadata": map[string]any{"namespace": namespace, "name": "m"},
			"spec": map[string]any{
				"source": map[string]any{"bootstrapServers": []any{source}},
				"target": map[string]any{"bootstrapServers": []any{target}},
				"topics": map[string]any{"include": []any{"orders\\..*"}},
			},
		}}
		return u
	}
	const refusedSource = `spec.source.bootstrapServers: evil.example.com:9092 not in the allowed bootstrap servers (*.kafka.svc:9092,kafka-*.example.com:*)`
	// The policy takes effect once the API server has loaded it: wait for the first refusal.
	testutil.Eventually(t, 60*time.Second, func() error {
		err := c.Create(ctx, mirror("vap-team", "evil.example.com:9092", "a.kafka.svc:9092"), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), refusedSource) {
			return fmt.Errorf("creating a KafkaMirror with source evil.example.com:9092: %v, want refused with %q", err, refusedSource)
		}
		return nil
	})
	tests := map[string]struct {
		namespace, source, target string
		want                      string
	}{
		"target outside":                          {"vap-team", "a.kafka.svc:9092", "kafka.svc:9092", "spec.target.bootstrapServers: kafka.svc:9092 not in"},
		"wrong port":                              {"vap-team", "a.kafka.svc:9093", "a.kafka.svc:9092", "spec.source.bootstrapServers: a.kafka.svc:9093 not in"},
		"both allowed":                            {"vap-team", "b.kafka.svc:9092", "kafka-1.example.com:19092", ""},
		"upper case is the same host":             {"vap-team", "B.KAFKA.SVC:9092", "kafka-1.example.com:19092", ""},
		"a namespace this release does not watch": {"vap-other", "evil.example.com:9092", "evil2.example.com:9092", ""},
	}
	for name, tc := range tests {
		err := c.Create(ctx, mirror(tc.namespace, tc.source, tc.target), client.DryRunAll)
		// The operator's own allow-list must judge every case the same way.
		allowList, listErr := controllers.NewBootstrapAllowList([]string{"*.kafka.svc:9092", "kafka-*.example.com:*"})
		if listErr != nil {
			t.Fatal(listErr)
		}
		operatorAllows := allowList.Allows(tc.source) && allowList.Allows(tc.target)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want refused with %q", name, err, tc.want)
		case tc.namespace == "vap-team" && operatorAllows != (tc.want == ""):
			t.Errorf("%s: the operator's allow-list allows it: %v; the admission policy: %v", name, operatorAllows, tc.want == "")
		}
	}
}
