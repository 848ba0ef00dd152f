package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// actAsKafkaMirror makes this test binary behave as a kafka-mirror binary built on Main,
// so that run can be tested as the process it is: signals, exit codes, stderr.
const actAsKafkaMirror = "KAFKA_MIRROR_CLI_TEST_ACT_AS_MAIN"

// init runs before the testing package parses its flags, so the CLI arguments reach
// Main untouched and no test runs in the child.
func init() {
	if os.Getenv(actAsKafkaMirror) == "1" {
		os.Exit(Main())
	}
}

// kafkaMirror runs this test binary as `kafka-mirror args...`.
func kafkaMirror(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), actAsKafkaMirror+"=1")
	return cmd
}

// TestRootCommand checks the engine's CLI as a team's image gets it from Main: offsets,
// run, validate and version with help and examples the CLI accepts, the logging flags on
// every subcommand, and extra subcommands added next to them.
func TestRootCommand(t *testing.T) {
	extra := &cobra.Command{Use: "extra", Short: "an extra command", RunE: func(*cobra.Command, []string) error { return nil }}
	root := NewRootCommand(WithCommands(extra))
	checkExamples(t, root, root.Example)
	var got []string
	for _, cmd := range root.Commands() {
		got = append(got, cmd.Name())
		if cmd == extra {
			continue
		}
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%s lacks help: Short %q, Long set %t, Example set %t", cmd.Name(), cmd.Short, cmd.Long != "", cmd.Example != "")
		}
		checkExamples(t, root, cmd.Example)
		for _, flag := range []string{"log-level", "log-format"} {
			if cmd.InheritedFlags().Lookup(flag) == nil {
				t.Errorf("%s does not accept --%s", cmd.Name(), flag)
			}
		}
	}
	if want := "extra failback failover offsets run validate version"; strings.Join(got, " ") != want {
		t.Errorf("subcommands = %q, want %q", got, want)
	}
}

// checkExamples parses every `kafka-mirror ...` line of an example with root.
func checkExamples(t *testing.T, root *cobra.Command, example string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(example, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "kafka-mirror" {
			continue
		}
		n++
		cmd, rest, err := root.Find(fields[1:])
		if err != nil || cmd == root {
			t.Errorf("example `%s` names no subcommand (%v)", strings.TrimSpace(line), err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("example `%s`: %v", strings.TrimSpace(line), err)
		}
	}
	if n == 0 {
		t.Errorf("example %q contains no kafka-mirror command", example)
	}
}

// TestMainExitCodes runs Main as a process: 0 for success, 1 with one "Error:" line on
// stderr for a failure.
func TestMainExitCodes(t *testing.T) {
	tests := map[string]struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		"version":         {args: []string{"version"}, wantCode: 0, wantStdout: "kafka-mirror dev\n"},
		"unknown command": {args: []string{"nope"}, wantCode: 1, wantStderr: "Error: unknown command \"nope\" for \"kafka-mirror\"\n"},
		"bad log level":   {args: []string{"run", "--config", "x.yaml", "--log-level", "loud"}, wantCode: 1, wantStderr: "Error: --log-level: unrecognized level: \"loud\"\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := kafkaMirror(tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout = %q, want it to start with %q", stdout.String(), tc.wantStdout)
			}
			if stderr.String() != tc.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}
