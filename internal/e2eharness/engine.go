package e2eharness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// BinaryEnv names the kafka-mirror binary under test.
const BinaryEnv = "KAFKA_MIRROR_BIN"

// EngineBinary is the kafka-mirror binary under test ($KAFKA_MIRROR_BIN); it fails the
// test when that is not set or not there. makeTarget is the suite's make target, which
// builds the binary and sets the variable.
func EngineBinary(t *testing.T, makeTarget string) string {
	t.Helper()
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		t.Fatalf("%s is not set: run `make %s`, which builds bin/kafka-mirror and sets it", BinaryEnv, makeTarget)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v (run `make build` or `make %s`)", BinaryEnv, bin, err, makeTarget)
	}
	return bin
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr(t *testing.T) string {
	t.Helper()
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// WriteConfig renders cfg the way the operator does (defaults filled, validated,
// config.Marshal) into dir/name.yaml and returns the path.
func WriteConfig(t *testing.T, dir, name string, cfg config.Config) string {
	t.Helper()
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the test's mirror config is invalid: %v", err)
	}
	data, err := config.Marshal(&cfg)
	if err != nil {
		t.Fatalf("rendering the mirror config: %v", err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Engine is one `kafka-mirror run` process, killed at the end of the test if it still
// runs.
type Engine struct {
	*engineproc.Process
	t    *testing.T
	Name string
}

// StartEngine starts `kafka-mirror run --config cfgPath` with its JSON log in
// <dir of cfgPath>/<name>.log.
func StartEngine(t *testing.T, name, cfgPath string) *Engine {
	t.Helper()
	e, err := LaunchEngine(t, name, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// LaunchEngine is StartEngine without failing the test, for use off the test goroutine.
func LaunchEngine(t *testing.T, name, cfgPath string) (*Engine, error) {
	cmd := exec.Command(os.Getenv(BinaryEnv), "run", "--config", cfgPath, "--log-format", "json")
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: filepath.Join(filepath.Dir(cfgPath), name+".log")})
	if err != nil {
		return nil, fmt.Errorf("starting engine %s: %w", name, err)
	}
	e := &Engine{Process: p, t: t, Name: name}
	t.Cleanup(func() { _ = e.Kill() })
	return e, nil
}

// AdoptEngine wraps a kafka-mirror process started otherwise (another subcommand than
// run), killed at the end of the test if it still runs.
func AdoptEngine(t *testing.T, name string, p *engineproc.Process) *Engine {
	e := &Engine{Process: p, t: t, Name: name}
	t.Cleanup(func() { _ = e.Kill() })
	return e
}

// StopCleanly sends SIGTERM and waits up to timeout for the engine to exit; it fails
// the test unless the engine exits 0 in time, and returns how long the stop took.
func (e *Engine) StopCleanly(timeout time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	if err := e.Stop(timeout); errors.Is(err, engineproc.ErrKilledAfterGrace) {
		e.t.Fatalf("engine %s did not exit within %v of SIGTERM; log tail:\n%s", e.Name, timeout, e.LogTail(20))
	}
	if code := e.ExitCode(); code != 0 {
		e.t.Fatalf("engine %s exited with code %d after SIGTERM; log tail:\n%s", e.Name, code, e.LogTail(20))
	}
	return time.Since(start)
}

// WaitExit waits up to timeout for the process to exit by itself and returns its code.
func (e *Engine) WaitExit(timeout time.Duration) (int, bool) {
	select {
	case <-e.Done():
		return e.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// Settle is for an engine that has just reported an error it may stop on: it waits up
// to grace for the engine to exit by itself, and stops it with SIGTERM if it is still
// running then (an engine that retries instead). Checking Running at once raced with
// an engine that was exiting: the SIGTERM found it stopping on its fatal error, code 1.
func (e *Engine) Settle(grace time.Duration) (exited bool, code int) {
	e.t.Helper()
	if code, ok := e.WaitExit(grace); ok {
		return true, code
	}
	e.StopCleanly(time.Minute)
	return false, 0
}

// FileTail returns the last n lines of the file at path, or why it could not be read.
func FileTail(path string, n int) string {
	tail, err := engineproc.TailFile(path, n)
	if err != nil {
		return err.Error()
	}
	return tail
}

// LogLines returns the log lines containing every one of subs (case-insensitive).
func (e *Engine) LogLines(subs ...string) []string {
	return e.logLines(-1, subs)
}

// LogContains returns the first log line containing every one of subs
// (case-insensitive), and whether there is one.
func (e *Engine) LogContains(subs ...string) (string, bool) {
	if lines := e.logLines(1, subs); len(lines) > 0 {
		return lines[0], true
	}
	return "", false
}

// ErrorContains is LogContains restricted to error lines: JSON lines at level error and
// the plain "Error: ..." line the command prints last.
func (e *Engine) ErrorContains(subs ...string) (string, bool) {
	return e.LogContains(append([]string{"error"}, subs...)...)
}

// CountLog counts the occurrences of sub in the log (case-insensitive).
func (e *Engine) CountLog(sub string) int {
	data, err := os.ReadFile(e.LogPath())
	if err != nil {
		return 0
	}
	return strings.Count(strings.ToLower(string(data)), strings.ToLower(sub))
}

// logLines returns up to most (all when negative) non-empty log lines containing every
// one of subs (case-insensitive).
func (e *Engine) logLines(most int, subs []string) []string {
	data, err := os.ReadFile(e.LogPath())
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(out) != most {
		line := sc.Text()
		lower := strings.ToLower(line)
		all := line != ""
		for _, s := range subs {
			if !strings.Contains(lower, strings.ToLower(s)) {
				all = false
				break
			}
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}
