package charttest

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChartMonitoring renders and lints the chart with the Grafana dashboard and the
// PrometheusRule turned on, and checks that they carry exactly the generated files
// (config/monitoring, which hack/monitoring writes and tests) and the labels the Grafana
// sidecar and Prometheus select them by. Both are off by default.
func TestChartMonitoring(t *testing.T) {
	set := []string{
		"metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring",
		"metrics.grafanaDashboard.annotations.grafana_folder=Kafka",
		"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prometheus",
	}
	args := []string{"lint", "--strict", chartPath}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if out, err := runHelm(t, args...); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Errorf("helm lint output:\n%s", out)
	}

	for _, o := range renderChart(t, release, releaseNamespace) {
		if k := o.GetKind(); k == "PrometheusRule" || (k == "ConfigMap" && strings.HasSuffix(o.GetName(), "-dashboard")) {
			t.Errorf("default values render %s/%s; the monitoring objects must be off by default", k, o.GetName())
		}
	}

	objs := renderChart(t, release, releaseNamespace, set...)
	cm := one(t, objs, "ConfigMap", fullname+"-dashboard")
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("dashboard ConfigMap label grafana_dashboard = %q, want \"1\" (the Grafana sidecar's default)", got)
	}
	if cm.GetNamespace() != "monitoring" || cm.GetAnnotations()["grafana_folder"] != "Kafka" {
		t.Errorf("dashboard ConfigMap namespace %q annotations %v, want monitoring and grafana_folder=Kafka", cm.GetNamespace(), cm.GetAnnotations())
	}
	data, _ := cm.Object["data"].(map[string]any)
	var got, want any
	if err := json.Unmarshal([]byte(data["kafka-mirror-dashboard.json"].(string)), &got); err != nil {
		t.Fatalf("dashboard ConfigMap holds no valid JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(repoRoot(t), "config/monitoring/kafka-mirror-dashboard.json"))), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the chart's dashboard differs from config/monitoring/kafka-mirror-dashboard.json: run make manifests")
	}

	rule := one(t, objs, "PrometheusRule", fullname)
	if rule.GetLabels()["release"] != "prometheus" || rule.GetNamespace() != releaseNamespace {
		t.Errorf("PrometheusRule labels %v namespace %q, want release=prometheus in %s", rule.GetLabels(), rule.GetNamespace(), releaseNamespace)
	}
	var shipped map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(repoRoot(t), "config/monitoring/prometheusrule.yaml"))), &shipped); err != nil {
		t.Fatal(err)
	}
	gotSpec, _ := json.Marshal(rule.Object["spec"])
	wantSpec, _ := json.Marshal(shipped["spec"])
	if string(gotSpec) != string(wantSpec) {
		t.Errorf("the chart's PrometheusRule spec differs from config/monitoring/prometheusrule.yaml (the alert templates must pass through helm untouched):\n got %s\nwant %s", gotSpec, wantSpec)
	}
	if !strings.Contains(string(gotSpec), "{{ $labels.app_kubernetes_io_instance }}") {
		t.Error("the PrometheusRule lost its {{ $labels... }} alert templates")
	}
}
