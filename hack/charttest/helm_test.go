package charttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const chartPath = "charts/kafka-mirror-operator"

// helmBinary is the helm the tests run: $HELM, which `make test` sets after `make helm`
// built it. Without it the chart tests cannot mean anything, so they fail.
func helmBinary(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM is not set: run the tests with `make test`, or `make helm` and set HELM to the binary it builds (~/.cache/kafka-mirror/bin/helm-v3.22.0)")
	}
	if _, err := exec.LookPath(helm); err != nil {
		t.Fatalf("HELM=%s is not an executable (%v): run `make helm`", helm, err)
	}
	return helm
}

// runHelm runs helm with args in the repository root and returns stdout; stderr is
// returned inside the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = repoRoot(t)
	// A private home keeps the user's helm repositories and plugins out of the test.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// renderChart runs `helm template` with --set values and returns the rendered objects.
func renderChart(t *testing.T, release, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartPath, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(strings.NewReader(out))
	if err != nil {
		t.Fatalf("while decoding helm template output: %v", err)
	}
	return objs
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
// Numbers become int64 as in every other unstructured object.
func decodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("while converting a document to JSON: %w", err)
		}
		if trimmed := bytes.TrimSpace(js); len(trimmed) == 0 || string(trimmed) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("while decoding %s: %w", js[:min(len(js), 120)], err)
		}
		objs = append(objs, u)
	}
}

// find returns the objects of a kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of a kind and name, failing the test otherwise.
func one(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range find(objs, kind) {
		if o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q, found %d among %s", kind, name, len(found), describeObjects(objs))
	}
	return found[0]
}

func describeObjects(objs []*unstructured.Unstructured) string {
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(names, ", ")
}

// field reads a nested field, failing the test when it is missing.
func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s/%s has no %s (err %v)", o.GetKind(), o.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// managerContainer returns the manager container of the operator Deployment.
func managerContainer(t *testing.T, deploy *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers := field(t, deploy, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		if c := c.(map[string]any); c["name"] == "manager" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no manager container", deploy.GetName())
	return nil
}

func stringList(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), chartPath) }
