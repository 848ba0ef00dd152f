package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/admissioncases"
)

// runValidate runs `kafka-mirror validate args...` in process and returns its output and
// error.
func runValidate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"validate"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestValidateAgreesWithTheAPIServer feeds `validate -f` every object that the real
// API server rejects in the envtest admission tests (controllers/validation_test.go,
// the same internal/admissioncases), and expects the same verdict: rejected, with the
// API server's message at its field.
func TestValidateAgreesWithTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	check := func(t *testing.T, doc []byte, field, message string) {
		t.Helper()
		path := filepath.Join(dir, strings.NewReplacer(" ", "-", "/", "-").Replace(t.Name())+".yaml")
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runValidate(t, "-f", path)
		if err == nil {
			t.Fatalf("validate passed what the API server rejects:\n%s%s", doc, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, message) && strings.Contains(line, field) {
				return
			}
		}
		t.Fatalf("validate reported\n%s\nwant a line with %q at %q", out, message, field)
	}
	for name, tc := range admissioncases.Rejected() {
		t.Run(name, func(t *testing.T) {
			// The same JSON the typed client sends to the API server.
			data, err := json.Marshal(admissioncases.Mirror("t-cel", "rejected", tc.Mutate))
			if err != nil {
				t.Fatal(err)
			}
			doc, err := yaml.JSONToYAML(data)
			if err != nil {
				t.Fatal(err)
			}
			check(t, doc, tc.Field, tc.Message)
		})
	}
	for name, tc := range admissioncases.RejectedRaw() {
		t.Run("raw "+name, func(t *testing.T) {
			check(t, []byte(admissioncases.RawMirror("t-cel", "rejected-raw", tc.Spec)), tc.Field, tc.Message)
		})
	}
}

// TestValidateAdmitsTheSamples: every sample that the API server admits
// (TestSamplesAreAdmitted in controllers) passes `validate -f config/samples/`.
func TestValidateAdmitsTheSamples(t *testing.T) {
	out, err := runValidate(t, "-f", "config/samples/")
	if err != nil {
		t.Fatalf("validate -f config/samples/ = %v:\n%s", err, out)
	}
	files, _ := filepath.Glob("config/samples/kafkamirror_v1alpha1_*.yaml")
	if n := strings.Count(out, "OK: "); len(files) < 4 || n < len(files) {
		t.Fatalf("%d OK lines for %d samples:\n%s", n, len(files), out)
	}
}

// TestValidateListsAndJSON: the items of a kind: List are judged one by one, and
// --output json reports the same problems as one object.
func TestValidateListsAndJSON(t *testing.T) {
	good, err := json.Marshal(admissioncases.Mirror("default", "good", nil))
	if err != nil {
		t.Fatal(err)
	}
	list := `{"apiVersion": "v1", "kind": "List", "items": [` + string(good) + `, ` +
		`{"apiVersion": "kafkamirror.io/v1alpha1", "kind": "KafkaMirror", "metadata": {"name": "bad"}, ` +
		`"spec": {"source": {"bootstrapServers": ["a:9092"]}, "target": {"bootstrapServers": ["b:9092"]}, "topics": {"include": ["x"]}, "streams": 0}}]}`
	path := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(path, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := runValidate(t, "-f", path)
	wantBad := "document 0 item 1 (KafkaMirror bad): spec.streams: Invalid value: 0: streams must be between 1 and 64"
	if err == nil || !strings.Contains(out, wantBad) || !strings.Contains(out, "OK: "+path+": KafkaMirror default/good") {
		t.Fatalf("validate = %v:\n%s\nwant the good item OK and %q", err, out, wantBad)
	}

	out, err = runValidate(t, "-f", path, "--output", "json")
	if err == nil {
		t.Fatalf("validate --output json passed a bad List:\n%s", out)
	}
	var rep struct {
		Problems int `json:"problems"`
		Files    []struct {
			Path     string   `json:"path"`
			Problems []string `json:"problems"`
			OK       []string `json:"ok"`
		} `json:"files"`
	}
	jsonPart, _, _ := strings.Cut(out, "\nError: ")
	if err := json.Unmarshal([]byte(jsonPart), &rep); err != nil {
		t.Fatalf("--output json printed no JSON object (%v):\n%s", err, out)
	}
	if rep.Problems != 1 || len(rep.Files) != 1 || rep.Files[0].Path != path || len(rep.Files[0].Problems) != 1 ||
		rep.Files[0].Problems[0] != wantBad || len(rep.Files[0].OK) != 1 {
		t.Fatalf("--output json = %+v, want 1 problem (%q) and 1 OK for %s", rep, wantBad, path)
	}
}
