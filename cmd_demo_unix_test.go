//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestDemoInterrupt checks that Ctrl-C stops the demo cleanly: the engine is stopped,
// nothing is left running, and the exit status says the demo did not finish.
func TestDemoInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two embedded clusters and the engine for a few seconds")
	}
	cmd := kafkaMirror("demo", "--records", "100000", "--rate", "1000")
	cmd.Env = append(cmd.Env, "TMPDIR="+t.TempDir())
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the demo: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	pidRE := regexp.MustCompile(`Started the engine: .*\(pid (\d+),`)
	var enginePID int
	for deadline := time.Now().Add(90 * time.Second); enginePID == 0; time.Sleep(100 * time.Millisecond) {
		if m := pidRE.FindStringSubmatch(out.String()); m != nil {
			enginePID, _ = strconv.Atoi(m[1])
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the engine did not start within 90s:\n%s", out.String())
		}
	}
	time.Sleep(2 * time.Second) // let it mirror for a moment
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("after Ctrl-C: %v, want exit code 1", err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the demo did not stop within 60s of Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Error: interrupted: the engine was stopped and the clusters shut down") {
		t.Errorf("the demo's output lacks the interruption message:\n%s", out.String())
	}
	if err := syscall.Kill(enginePID, 0); !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(enginePID, syscall.SIGKILL)
		t.Errorf("the engine (pid %d) still runs after the demo stopped (kill -0: %v)", enginePID, err)
	}
}
