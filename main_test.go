package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpTexts checks that every subcommand explains itself: a one-line summary, a
// longer description and examples, and that every example is a command the CLI accepts
// (the subcommand exists and takes the flags shown).
func TestHelpTexts(t *testing.T) {
	root := newRootCommand()
	if root.Example == "" {
		t.Errorf("kafka-mirror has no examples in its help")
	}
	checkExamples(t, root.Name(), root.Example)
	want := map[string]bool{"demo": true, "failback": true, "failover": true, "manager": true, "offsets": true, "run": true, "validate": true, "version": true}
	for _, cmd := range root.Commands() {
		name := cmd.Name()
		if name == "help" || name == "completion" {
			continue // cobra's own
		}
		if !want[name] {
			t.Errorf("unexpected subcommand %q: add it to this test and to the README", name)
			continue
		}
		delete(want, name)
		t.Run(name, func(t *testing.T) {
			if cmd.Hidden {
				t.Errorf("%s is hidden", name)
			}
			if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
				t.Errorf("%s lacks help: Short %q, Long set %t, Example set %t", name, cmd.Short, cmd.Long != "", cmd.Example != "")
			}
			checkExamples(t, name, cmd.Example)
			var out bytes.Buffer
			r := newRootCommand()
			r.SetOut(&out)
			r.SetArgs([]string{name, "--help"})
			if err := r.Execute(); err != nil {
				t.Fatalf("%s --help: %v", name, err)
			}
			if !strings.Contains(out.String(), "Examples:") {
				t.Errorf("%s --help shows no examples:\n%s", name, out.String())
			}
		})
	}
	for name := range want {
		t.Errorf("subcommand %q is missing", name)
	}
}

// checkExamples parses every `kafka-mirror ...` line of an Example with the real CLI.
func checkExamples(t *testing.T, cmdName, example string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(example, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "kafka-mirror" {
			continue
		}
		n++
		checkCLI(t, strings.TrimSpace(line), fields[1:])
	}
	if n == 0 {
		t.Errorf("the examples of %s contain no kafka-mirror command", cmdName)
	}
}
