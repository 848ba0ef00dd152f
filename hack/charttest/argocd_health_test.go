package charttest

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// healthTests is the file format Argo CD uses for its bundled resource customizations
// (resource_customizations/<group>/<kind>/health_test.yaml), so the check can be contributed
// upstream as it is.
type healthTests struct {
	Tests []struct {
		HealthStatus struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"healthStatus"`
		InputPath string `json:"inputPath"`
	} `json:"tests"`
}

// TestArgoCDHealthCheck runs config/argocd/health.lua on every fixture listed in
// config/argocd/health_test.yaml and compares the status and message Argo CD would show.
func TestArgoCDHealthCheck(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "argocd")
	script := readFile(t, filepath.Join(dir, "health.lua"))
	var cases healthTests
	if err := yaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(dir, "health_test.yaml"))), &cases); err != nil {
		t.Fatalf("while reading health_test.yaml: %v", err)
	}
	if len(cases.Tests) < 8 {
		t.Fatalf("health_test.yaml lists %d cases; expected every status (Healthy, Progressing, Degraded, Suspended) covered", len(cases.Tests))
	}
	seen := map[string]bool{}
	for _, tc := range cases.Tests {
		t.Run(tc.InputPath, func(t *testing.T) {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(dir, tc.InputPath))), &obj); err != nil {
				t.Fatalf("while reading %s: %v", tc.InputPath, err)
			}
			status, message, err := runHealthLua(script, obj)
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.HealthStatus.Status || message != tc.HealthStatus.Message {
				t.Errorf("health = %q %q, want %q %q", status, message, tc.HealthStatus.Status, tc.HealthStatus.Message)
			}
			seen[status] = true
		})
	}
	for _, want := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		if !seen[want] {
			t.Errorf("no fixture produces %s", want)
		}
	}
}

// TestArgoCDConfigMapEmbedsHealthCheck guards the copy of health.lua inside the argocd-cm
// snippet: users paste or patch that file, so it must be the tested script byte for byte.
func TestArgoCDConfigMapEmbedsHealthCheck(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "argocd")
	var cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(dir, "argocd-cm.yaml"))), &cm); err != nil {
		t.Fatalf("while reading argocd-cm.yaml: %v", err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata["name"] != "argocd-cm" {
		t.Errorf("argocd-cm.yaml is %s %v, want ConfigMap argocd-cm", cm.Kind, cm.Metadata["name"])
	}
	const key = "resource.customizations.health.kafkamirror.io_KafkaMirror"
	got, ok := cm.Data[key]
	if !ok {
		t.Fatalf("argocd-cm.yaml has no data key %s; keys: %v", key, cm.Data)
	}
	if want := readFile(t, filepath.Join(dir, "health.lua")); got != want {
		t.Errorf("argocd-cm.yaml's %s differs from health.lua; copy health.lua into it", key)
	}
}

// TestArgoCDHealthCheckUsesAPIConditions ties the script and its fixtures to the API: every
// condition type and reason they name must be a constant in api/v1alpha1/conditions.go, so a
// renamed reason cannot leave the check silently treating it as unknown (Degraded).
func TestArgoCDHealthCheckUsesAPIConditions(t *testing.T) {
	root := repoRoot(t)
	known := apiConditionStrings(t, filepath.Join(root, "api", "v1alpha1", "conditions.go"))
	dir := filepath.Join(root, "config", "argocd")

	script := readFile(t, filepath.Join(dir, "health.lua"))
	var named []string
	for _, m := range regexp.MustCompile(`(?m)^\s+([A-Za-z]+) = true,$`).FindAllStringSubmatch(script, -1) {
		named = append(named, m[1])
	}
	for _, m := range regexp.MustCompile(`condition\(conditions, "([A-Za-z]+)"\)`).FindAllStringSubmatch(script, -1) {
		named = append(named, m[1])
	}
	if len(named) < 5 {
		t.Fatalf("found only %v in health.lua; the patterns above no longer match the script", named)
	}
	fixtures, err := filepath.Glob(filepath.Join(dir, "testdata", "*.yaml"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	for _, f := range fixtures {
		for _, m := range regexp.MustCompile(`(?m)^\s+(?:- type|reason): ([A-Za-z]+)$`).FindAllStringSubmatch(readFile(t, f), -1) {
			named = append(named, m[1])
		}
	}
	for _, name := range named {
		if !known[name] {
			t.Errorf("%q is used by the Argo CD health check or its fixtures but is no condition type or reason in api/v1alpha1/conditions.go", name)
		}
	}
}

// apiConditionStrings returns the values of the Condition* and Reason* constants.
func apiConditionStrings(t *testing.T, path string) map[string]bool {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatalf("while parsing %s: %v", path, err)
	}
	known := map[string]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Condition") && !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					known[v] = true
				}
			}
		}
		return true
	})
	if len(known) == 0 {
		t.Fatalf("no Condition*/Reason* string constants in %s", path)
	}
	return known
}

// runHealthLua runs a health script the way Argo CD does: a fresh state with only the safe
// standard libraries, the object as the global `obj`, and the returned table's status and
// message.
func runHealthLua(script string, obj map[string]any) (status, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable,
		lua.StringLibName: lua.OpenString, lua.MathLibName: lua.OpenMath,
	} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	// Argo CD hands the object over as decoded JSON: numbers are float64.
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", "", fmt.Errorf("while encoding the object: %w", err)
	}
	var decoded any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return "", "", fmt.Errorf("while decoding the object: %w", err)
	}
	l.SetGlobal("obj", toLua(l, decoded))
	if err := l.DoString(script); err != nil {
		return "", "", fmt.Errorf("while running health.lua: %w", err)
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("health.lua returned %s, want a table", l.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message")), nil
}

func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(v))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("while reading %s: %v", path, err)
	}
	return string(b)
}

// repoRoot is the repository root: this package lives in hack/charttest.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	return root
}
