package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// config is a MirrorConfig whose handler chain names the custom handler.
const config = `apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["source-kafka:9092"]}
target: {bootstrapServers: ["target-kafka:9092"]}
consumerGroup: users-mirror
topics: {include: ["users"]}
handlers:
  - name: redact-email
    args: {replacement: "%s"}
`

// TestCustomImageBinary builds this example as a team would (go build with the
// Makefile's -ldflags) and runs the binary: validate knows the custom handler and checks
// its args at their field path, the stock handlers are still there, and version is
// stamped like the stock binary.
func TestCustomImageBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "kafka-mirror")
	const stamp = "-X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.version=v0.0.1-custom"
	if out, err := exec.Command(goBin, "build", "-ldflags", stamp, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", strings.Replace(config, "%s", "***", 1))
	badArgs := write("bad-args.yaml", strings.Replace(config, "%s", "nobody@example.com", 1))
	chained := write("chained.yaml", strings.Replace(config, "%s", "***", 1)+"  - name: header-filter\n    args: {mode: drop, header: internal}\n")

	tests := map[string]struct {
		args     []string
		wantOut  string
		wantCode int
	}{
		"the custom handler is known": {
			args:    []string{"validate", "--config", good},
			wantOut: "OK: " + good + ": MirrorConfig, 1 include pattern(s), 0 exclude pattern(s), 1 handler(s) (redact-email)\n",
		},
		"bad args: the field path and the reason": {
			args:     []string{"validate", "--config", badArgs},
			wantOut:  badArgs + `: handlers[0].args.replacement: must not contain "@", a quote or a backslash: the value must stay valid JSON without an address` + "\n",
			wantCode: 1,
		},
		"chained with a built-in handler": {
			args:    []string{"validate", "--config", chained},
			wantOut: "OK: " + chained + ": MirrorConfig, 1 include pattern(s), 0 exclude pattern(s), 2 handler(s) (redact-email, header-filter)\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			if stdout.String() != tc.wantOut {
				t.Errorf("stdout =\n%s\nwant\n%s", stdout.String(), tc.wantOut)
			}
		})
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sarama := regexp.MustCompile(`(?m)^\s*github\.com/IBM/sarama\s+(\S+)`).FindSubmatch(gomod)
	if sarama == nil {
		t.Fatal("go.mod does not require github.com/IBM/sarama")
	}
	for _, want := range []string{"kafka-mirror v0.0.1-custom\n", "  sarama: " + string(sarama[1]) + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version printed\n%s\nwithout %q", out, want)
		}
	}
}
