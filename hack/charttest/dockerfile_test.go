package charttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDockerfile checks the properties of the image that no build here can show (there is no
// container engine on these machines): a static binary on a distroless base, run as the
// non-root UID the chart's and the operator's securityContexts assume, stamped with a version
// the binary really has variables for, built with the Go version go.mod asks for.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	text := readFile(t, filepath.Join(root, "Dockerfile"))
	// Join continuation lines so that one instruction is one line.
	text = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, " ")
	var stages [][]string // instructions per FROM
	args := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			if name, value, ok := strings.Cut(strings.TrimPrefix(line, "ARG "), "="); ok {
				args[name] = value
			}
			continue
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a builder and a final stage", len(stages))
	}
	builder, final := strings.Join(stages[0], "\n"), stages[len(stages)-1]

	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, filepath.Join(root, "go.mod")))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	if !strings.Contains(stages[0][0], "golang:${GO_VERSION}") || args["GO_VERSION"] != goVersion[1] {
		t.Errorf("builder is %q with GO_VERSION=%q, want golang:${GO_VERSION} with %s (go.mod)", stages[0][0], args["GO_VERSION"], goVersion[1])
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-X " + versionPackage + ".version=${VERSION}", "-X " + versionPackage + ".commit=${COMMIT}", "ARG VERSION", "ARG COMMIT"} {
		if !strings.Contains(builder, want) {
			t.Errorf("builder stage lacks %q", want)
		}
	}

	if base := final[0]; base != "FROM gcr.io/distroless/static:nonroot" {
		t.Errorf("final stage is %q, want FROM gcr.io/distroless/static:nonroot", base)
	}
	var user, entrypoint string
	for _, ins := range final {
		if v, ok := strings.CutPrefix(ins, "USER "); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(ins, "ENTRYPOINT "); ok {
			entrypoint = v
		}
	}
	// Numeric, so that the kubelet can verify runAsNonRoot without reading /etc/passwd.
	if user != "65532:65532" && user != "65532" {
		t.Errorf("final USER = %q, want 65532 (numeric, non-root)", user)
	}
	if !regexp.MustCompile(`^\["[^"]*/kafka-mirror"\]$`).MatchString(entrypoint) {
		t.Errorf("ENTRYPOINT = %s, want the kafka-mirror binary in exec form", entrypoint)
	}
	if !slices.ContainsFunc(final, func(s string) bool { return strings.HasPrefix(s, "COPY --from=builder ") }) {
		t.Error("final stage copies nothing from the builder")
	}

	// -X silently does nothing when the variable does not exist.
	vars := stringVars(t, filepath.Join(root, "mirror", "cli"))
	for _, name := range []string{"version", "commit"} {
		if !vars[name] {
			t.Errorf("package %s has no string variable %q for -X %s.%s", versionPackage, name, versionPackage, name)
		}
	}

	ignored := strings.Fields(readFile(t, filepath.Join(root, ".dockerignore")))
	for _, needed := range []string{"go.mod", "go.sum", "*.go", "api", "controllers", "mirror", "internal"} {
		if slices.Contains(ignored, needed) {
			t.Errorf(".dockerignore excludes %s, which the build needs", needed)
		}
	}
}

// versionPackage holds the version variables the build stamps; it is the engine's CLI
// package rather than main so that a team's own image is stamped the same way.
const versionPackage = "github.com/kafka-mirror/kafka-mirror-operator/mirror/cli"

// stringVars returns the package-level variables of the package in dir initialised
// with a string literal.
func stringVars(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatalf("while parsing %s: %v", f, err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							vars[name.Name] = true
						}
					}
				}
			}
		}
	}
	return vars
}
