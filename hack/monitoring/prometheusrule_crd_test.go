package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	// The PrometheusRule type the CRD is generated from; imported so that go.mod keeps
	// the module at the version the test generates from.
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// monitoringAPI is the Go package of the Prometheus Operator's API types.
const monitoringAPI = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

// TestPrometheusRuleServerSideDryRun: the shipped PrometheusRule is accepted by a real
// API server that has the Prometheus Operator's PrometheusRule CRD (generated here with
// controller-gen from the operator's own API types, the way that project builds its CRDs;
// the module proxy serves the types but not the repository that holds the CRD files),
// and the same API server refuses a broken one.
func TestPrometheusRuleServerSideDryRun(t *testing.T) {
	gen := os.Getenv("CONTROLLER_GEN")
	if gen == "" {
		t.Fatal("CONTROLLER_GEN is not set: run the tests with `make test` (it builds controller-gen once, cached)")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`")
	}
	crdDir := t.TempDir()
	cmd := exec.Command(gen, "crd:allowDangerousTypes=true", "paths="+monitoringAPI, "output:crd:dir="+crdDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(crdDir, "monitoring.coreos.com_prometheusrules.yaml")); err != nil {
		t.Fatalf("controller-gen wrote no PrometheusRule CRD: %v", err)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("while starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	load := func() *unstructured.Unstructured {
		data, err := os.ReadFile(filepath.Join(repoRoot, "config/monitoring/prometheusrule.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace("default")
		return u
	}
	rule := load()
	if err := c.Create(context.Background(), rule, client.DryRunAll); err != nil {
		t.Fatalf("the API server refuses the shipped PrometheusRule: %v", err)
	}

	// Proves the CRD validates: a rule group without its rules' expressions is refused.
	broken := load()
	groups, _, _ := unstructured.NestedSlice(broken.Object, "spec", "groups")
	g := groups[0].(map[string]any)
	rules := g["rules"].([]any)
	delete(rules[0].(map[string]any), "expr")
	if err := unstructured.SetNestedSlice(broken.Object, groups, "spec", "groups"); err != nil {
		t.Fatal(err)
	}
	err = c.Create(context.Background(), broken, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "expr") {
		t.Fatalf("a rule without expr: err = %v, want a refusal naming expr", err)
	}
}
