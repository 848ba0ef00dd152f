package charttest

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestMetricsDocMatchesEngine keeps docs/metrics.md true: every kafka_mirror_* name it uses
// (in tables, PromQL and alerts) is a metric the engine or the operator registers (any
// non-test Go file under mirror/ or controllers/: the checkpoint writer's group metrics
// live beside it, not in mirror/metrics.go), every one of them is documented, and the
// example PrometheusRule is valid YAML with a lag alert.
func TestMetricsDocMatchesEngine(t *testing.T) {
	root := repoRoot(t)
	doc := readFile(t, filepath.Join(root, "docs", "metrics.md"))
	code := goSources(t, filepath.Join(root, "mirror"), filepath.Join(root, "controllers"))

	registered := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(kafka_mirror_[a-z_]+)"`).FindAllStringSubmatch(code, -1) {
		registered[m[1]] = true
	}
	if len(registered) < 11 {
		t.Fatalf("found %d metric names under mirror/ and controllers/; the pattern no longer matches the code", len(registered))
	}
	documented := map[string]bool{}
	for _, name := range regexp.MustCompile(`kafka_mirror_[a-z_]+`).FindAllString(doc, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && registered[b] {
				base = b
			}
		}
		if !registered[base] {
			t.Errorf("docs/metrics.md uses %s, which no Go file under mirror/ or controllers/ registers", name)
		}
		documented[base] = true
	}
	for name := range registered {
		if !documented[name] {
			t.Errorf("metric %s is registered but not documented in docs/metrics.md", name)
		}
	}

	block := regexp.MustCompile("(?s)```yaml\n(apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n.*?)```").FindStringSubmatch(doc)
	if block == nil {
		t.Fatal("docs/metrics.md has no PrometheusRule example")
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(block[1]), &rule); err != nil {
		t.Fatalf("the PrometheusRule example is not valid YAML: %v", err)
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Expr == "" {
				t.Errorf("alert %s has no expr", r.Alert)
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("alert %s has unbalanced parentheses: %s", r.Alert, r.Expr)
			}
		}
	}
	if !slices.Contains(alerts, "KafkaMirrorLagHigh") {
		t.Errorf("alerts %v lack KafkaMirrorLagHigh", alerts)
	}

	// The doc's queries group by the label the chart's mirror ServiceMonitor copies from the
	// Service; Prometheus turns app.kubernetes.io/instance into app_kubernetes_io_instance.
	monitor := readFile(t, filepath.Join(chartDir(t), "templates", "servicemonitor.yaml"))
	if !strings.Contains(monitor, "targetLabels:\n    - app.kubernetes.io/instance") || !strings.Contains(doc, "app_kubernetes_io_instance") {
		t.Error("docs/metrics.md and the chart's mirror ServiceMonitor disagree on the label carrying the KafkaMirror's name")
	}
}

// TestSecurityDocMatchesRBAC keeps the RBAC table of docs/security.md equal to
// config/rbac/role.yaml plus the leader-election Role: same resources, same verbs.
func TestSecurityDocMatchesRBAC(t *testing.T) {
	root := repoRoot(t)
	doc := readFile(t, filepath.Join(root, "docs", "security.md"))
	want := map[string][]string{}
	for _, r := range declaredRules(t) {
		want[r.group+"/"+r.resource] = append(want[r.group+"/"+r.resource], r.verbs...)
	}
	// The HTTPS metrics' TokenReviews and SubjectAccessReviews (a ClusterRole of its own).
	for key, verbs := range grantedVerbs(t, readObject(t, filepath.Join(root, "config", "rbac", "metrics_auth_role.yaml"))) {
		want[key] = append(want[key], verbs...)
	}
	leader := readObject(t, filepath.Join(root, "config", "rbac", "leader_election_role.yaml"))
	for key, verbs := range grantedVerbs(t, leader) {
		if strings.HasSuffix(key, "/leases") {
			want[key] = append(want[key], verbs...)
		}
	}

	row := regexp.MustCompile("(?m)^\\| (core|`[a-z0-9.]+`) \\| ([^|]+) \\| ([a-z, ]+) \\|")
	got := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		group := strings.Trim(m[1], "`")
		if group == "core" {
			group = ""
		}
		resources := regexp.MustCompile("`([a-z/]+)`").FindAllStringSubmatch(m[2], -1)
		for _, res := range resources {
			for _, verb := range strings.Split(m[3], ",") {
				got[group+"/"+res[1]] = append(got[group+"/"+res[1]], strings.TrimSpace(verb))
			}
		}
	}
	if len(got) == 0 {
		t.Fatal("found no RBAC table rows in docs/security.md")
	}
	for key, verbs := range want {
		slices.Sort(verbs)
		g := got[key]
		slices.Sort(g)
		if !slices.Equal(slices.Compact(verbs), g) {
			t.Errorf("docs/security.md lists %s with verbs %v; config/rbac grants %v", key, g, slices.Compact(verbs))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("docs/security.md lists %s, which config/rbac does not grant", key)
		}
	}
}

// goSources returns the text of every non-test Go file under the given directories.
func goSources(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b.WriteString(readFile(t, path))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
