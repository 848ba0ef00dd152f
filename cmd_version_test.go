package main

import (
	"bytes"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// requiredVersion reads the version of module path that go.mod requires, so the test
// follows dependency upgrades instead of pinning a number.
func requiredVersion(t *testing.T, path string) string {
	t.Helper()
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatalf("reading go.mod: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("go.mod does not require %s", path)
	}
	return string(m[1])
}

func TestVersionCommand(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3", "abc1234"

	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version failed: %v", err)
	}
	want := "kafka-mirror v1.2.3\n" +
		"  commit: abc1234\n" +
		"  go:     " + runtime.Version() + "\n" +
		"  sarama: " + requiredVersion(t, saramaModule) + "\n"
	if got := out.String(); got != want {
		t.Errorf("version printed\n%s\nwant\n%s", got, want)
	}
}

func TestVersionCommandRejectsArguments(t *testing.T) {
	root := newRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "unknown command") && !strings.Contains(err.Error(), "accepts 0 arg") {
		t.Fatalf("version extra: got error %v, want an argument error", err)
	}
}
