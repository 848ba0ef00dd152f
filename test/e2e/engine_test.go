//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
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
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
	peakRSS atomic.Int64 // kB, VmHWM sampled while the process lives
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
	logPath := filepath.Join(filepath.Dir(cfgPath), name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--log-format", "json")
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting engine %s: %w", name, err)
	}
	e := &engine{t: t, name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		e.waitErr = cmd.Wait()
		logFile.Close()
		close(e.done)
	}()
	go e.sampleRSS()
	t.Cleanup(func() {
		if e.running() {
			_ = e.cmd.Process.Kill()
			<-e.done
		}
	})
	return e, nil
}

// sampleRSS records the process's peak resident set size (VmHWM) until it exits.
func (e *engine) sampleRSS() {
	status := fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-tick.C:
		}
		data, err := os.ReadFile(status)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > e.peakRSS.Load() {
					e.peakRSS.Store(kb)
				}
			}
		}
	}
}

func (e *engine) running() bool {
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to go.
func (e *engine) kill() {
	e.t.Helper()
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
}

// stop sends SIGTERM and waits up to timeout for a clean exit; it fails the test if the
// engine does not exit in time or exits non-zero.
func (e *engine) stop(timeout time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(timeout):
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
	case <-e.done:
		return e.exitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

func (e *engine) exitCode() int {
	var ee *exec.ExitError
	if errors.As(e.waitErr, &ee) {
		return ee.ExitCode()
	}
	if e.waitErr != nil {
		return -1
	}
	return 0
}

// logTail returns the last n lines the engine wrote.
func (e *engine) logTail(n int) string {
	data, err := os.ReadFile(e.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logContains reports whether a log line contains every one of subs (case-insensitive).
func (e *engine) logContains(subs ...string) (string, bool) {
	data, err := os.ReadFile(e.logPath)
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
	data, err := os.ReadFile(e.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(strings.ToLower(string(data)), strings.ToLower(sub))
}
