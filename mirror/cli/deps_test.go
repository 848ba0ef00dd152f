package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsNoOperatorCode keeps the engine's CLI free of the operator: the engine's
// dependencies point one way (design.md), and a team's image built on Main should not
// carry the controller, controller-runtime or the Kubernetes API types (about 7 MB).
func TestImportsNoOperatorCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the package's dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/kafka-mirror/kafka-mirror-operator/controllers",
		"github.com/kafka-mirror/kafka-mirror-operator/api/",
		"sigs.k8s.io/controller-runtime",
		"k8s.io/api/",
		"k8s.io/client-go",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("mirror/cli depends on %s", dep)
			}
		}
	}
}
