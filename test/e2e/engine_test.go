//go:build e2e

package e2e

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

// engineBinary is the kafka-mirror binary under test.
func engineBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("KAFKA_MIRROR_BIN")
	if bin == "" {
		t.Fatal("KAFKA_MIRROR_BIN is not set: run `make e2e`, which builds bin/kafka-mirror and sets it")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("KAFKA_MIRROR_BIN=%s: %v (run `make build` or `make e2e`)", bin, err)
	}
	return bin
}

// freeAddr returns a loopback address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// writeConfig renders cfg the way the operator does (defaults filled, validated,
// config.Marshal) into dir/name.yaml and returns the path.
func writeConfig(t *testing.T, dir, name string, cfg config.Config) string {
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

// engine is one kafka-mirror run process.
type engine struct {
	*engineproc.Process
	t    *testing.T
	name string
}

// startEngine starts `kafka-mirror run --config cfgPath` and stops it (kill -9) at the
// end of the test if it still runs.
func startEngine(t *testing.T, name, cfgPath string) *engine {
	t.Helper()
	e, err := launchEngine(t, name, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// launchEngine is startEngine without failing the test, for use off the test goroutine.
func launchEngine(t *testing.T, name, cfgPath string) (*engine, error) {
	bin := os.Getenv("KAFKA_MIRROR_BIN")
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--log-format", "json")
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: filepath.Join(filepath.Dir(cfgPath), name+".log")})
	if err != nil {
		return nil, fmt.Errorf("starting engine %s: %w", name, err)
	}
	e := &engine{Process: p, t: t, name: name}
	t.Cleanup(func() { _ = e.Kill() })
	return e, nil
}

// running reports whether the process still runs.
func (e *engine) running() bool { return e.Running() }

// kill sends SIGKILL and waits for the process to go.
func (e *engine) kill() {
	e.t.Helper()
	_ = e.Kill()
}

// stop sends SIGTERM and waits up to timeout for a clean exit; it fails the test if the
// engine does not exit in time or exits non-zero.
func (e *engine) stop(timeout time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	if err := e.Stop(timeout); errors.Is(err, engineproc.ErrKilledAfterGrace) {
		e.t.Fatalf("engine %s did not exit within %v of SIGTERM; log tail:\n%s", e.name, timeout, e.logTail(20))
	}
	if code := e.exitCode(); code != 0 {
		e.t.Fatalf("engine %s exited with code %d after SIGTERM; log tail:\n%s", e.name, code, e.logTail(20))
	}
	return time.Since(start)
}

// waitExit waits up to timeout for the process to exit by itself and returns its code.
func (e *engine) waitExit(timeout time.Duration) (int, bool) {
	select {
	case <-e.Done():
		return e.exitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// settle is for an engine that has just reported an error it may stop on: it waits up
// to grace for the engine to exit by itself, and stops it with SIGTERM if it is still
// running then (an engine that retries instead). Checking running() at once raced with
// an engine that was exiting: the SIGTERM found it stopping on its fatal error, code 1.
func (e *engine) settle(grace time.Duration) (exited bool, code int) {
	e.t.Helper()
	if code, ok := e.waitExit(grace); ok {
		return true, code
	}
	e.stop(time.Minute)
	return false, 0
}

// exitCode is the exit code once the process has ended (-1 for a signal).
func (e *engine) exitCode() int { return e.ExitCode() }

// logTail returns the last n lines the engine wrote.
func (e *engine) logTail(n int) string { return fileTail(e.LogPath(), n) }

// fileTail returns the last n lines of the file at path, or why it could not be read.
func fileTail(path string, n int) string {
	tail, err := engineproc.TailFile(path, n)
	if err != nil {
		return err.Error()
	}
	return tail
}

// logContains reports whether a log line contains every one of subs (case-insensitive).
func (e *engine) logContains(subs ...string) (string, bool) {
	data, err := os.ReadFile(e.LogPath())
	if err != nil {
		return "", false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.ToLower(sc.Text())
		all := true
		for _, s := range subs {
			if !strings.Contains(line, strings.ToLower(s)) {
				all = false
				break
			}
		}
		if all {
			return sc.Text(), true
		}
	}
	return "", false
}

// errorContains is logContains restricted to error lines: JSON lines at level error and
// the plain "Error: ..." line the command prints last.
func (e *engine) errorContains(subs ...string) (string, bool) {
	return e.logContains(append([]string{"error"}, subs...)...)
}

// countLog counts log lines containing sub (case-insensitive).
func (e *engine) countLog(sub string) int {
	data, err := os.ReadFile(e.LogPath())
	if err != nil {
		return 0
	}
	return strings.Count(strings.ToLower(string(data)), strings.ToLower(sub))
}
