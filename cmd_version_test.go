package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand checks `version` of the stock binary against go.mod: the test
// binary of package main, unlike a library's, records the module's dependencies.
// Stamping is tested in mirror/cli, where the variables are.
func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version failed: %v", err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "kafka-mirror ") || !strings.HasPrefix(lines[1], "  commit: ") {
		t.Fatalf("version printed\n%s\nwant four lines: kafka-mirror VERSION, commit, go, sarama", out.String())
	}
	if want := "  go:     " + runtime.Version(); lines[2] != want {
		t.Errorf("go line = %q, want %q", lines[2], want)
	}
	if want := "  sarama: " + goModRequirement(t, "github.com/IBM/sarama"); lines[3] != want {
		t.Errorf("sarama line = %q, want %q (go.mod)", lines[3], want)
	}
}
