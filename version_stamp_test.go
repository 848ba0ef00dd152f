package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// xFlag matches one -X import/path.name=value of an -ldflags string.
var xFlag = regexp.MustCompile(`-X ([^\s="]+)=(\S+)`)

// TestVersionIsStamped builds the binary with the -ldflags the Makefile uses and checks
// that `kafka-mirror version` prints the stamped version and commit, and that the
// Dockerfile stamps the same variables. A variable that moves without the build
// following would otherwise leave every release saying "dev".
func TestVersionIsStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with the go command")
	}
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^LDFLAGS :?= (.*)$`).FindStringSubmatch(string(makefile))
	if line == nil {
		t.Fatal("the Makefile defines no LDFLAGS")
	}
	ldflags := strings.NewReplacer("$(VERSION)", "v9.8.7-test", "$(COMMIT)", "abc1234").Replace(line[1])
	makeVars := stampedVariables(ldflags)
	if len(makeVars) != 2 {
		t.Fatalf("the Makefile's LDFLAGS %q stamp %v, want a version and a commit", line[1], makeVars)
	}

	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(stampedVariables(string(dockerfile)), " "), strings.Join(makeVars, " "); got != want {
		t.Errorf("the Dockerfile stamps %q, the Makefile %q", got, want)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kafka-mirror")
	if out, err := exec.Command(goBin, "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-mirror version: %v\n%s", err, out)
	}
	for _, want := range []string{"kafka-mirror v9.8.7-test\n", "  commit: abc1234\n", "  sarama: " + goModRequirement(t, "github.com/IBM/sarama") + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kafka-mirror version printed\n%s\nwithout %q", out, want)
		}
	}
}

// stampedVariables lists the import-path-qualified variables an -ldflags string sets.
func stampedVariables(s string) []string {
	var vars []string
	for _, m := range xFlag.FindAllStringSubmatch(s, -1) {
		vars = append(vars, m[1])
	}
	return vars
}

// goModRequirement returns the version of module path that go.mod requires.
func goModRequirement(t *testing.T, path string) string {
	t.Helper()
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("go.mod does not require %s", path)
	}
	return string(m[1])
}
