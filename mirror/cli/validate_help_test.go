package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestValidateHelpExamplesExist keeps the help's examples runnable from a clone: every
// repository path an example names (config/..., examples/...) exists.
func TestValidateHelpExamplesExist(t *testing.T) {
	validate, _, err := NewRootCommand().Find([]string{"validate"})
	if err != nil || validate.Name() != "validate" {
		t.Fatalf("no validate subcommand: %v", err)
	}
	paths := regexp.MustCompile(`(?:config|examples)/[\w./-]+\.ya?ml`).FindAllString(validate.Example, -1)
	if len(paths) == 0 {
		t.Fatalf("validate's examples name no repository file: %q", validate.Example)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join("..", "..", p)); err != nil {
			t.Errorf("validate --help names %s, which is not in the repository: %v", p, err)
		}
	}
}
