//go:build kafka

package e2ekafka

import (
	"errors"
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
		t.Fatal("KAFKA_MIRROR_BIN is not set: run `make e2e-kafka`, which builds bin/kafka-mirror and sets it")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("KAFKA_MIRROR_BIN=%s: %v (run `make build` or `make e2e-kafka`)", bin, err)
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

// engine is one `kafka-mirror run` process, killed at the end of the test if it still
// runs.
type engine struct {
	*engineproc.Process
	t    *testing.T
	name string
}

// startEngine starts `kafka-mirror run --config cfgPath` with its JSON log in
// <dir>/<name>.log.
func startEngine(t *testing.T, name, cfgPath string) *engine {
	t.Helper()
	cmd := exec.Command(engineBinary(t), "run", "--config", cfgPath, "--log-format", "json")
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: filepath.Join(filepath.Dir(cfgPath), name+".log")})
	if err != nil {
		t.Fatalf("starting engine %s: %v", name, err)
	}
	e := &engine{Process: p, t: t, name: name}
	t.Cleanup(func() { _ = e.Kill() })
	return e
}

// stop sends SIGTERM and fails the test unless the engine exits 0 within timeout.
func (e *engine) stop(timeout time.Duration) {
	e.t.Helper()
	err := e.Stop(timeout)
	if errors.Is(err, engineproc.ErrKilledAfterGrace) {
		e.t.Fatalf("engine %s did not exit within %v of SIGTERM; log tail:\n%s", e.name, timeout, e.LogTail(20))
	}
	if code := e.ExitCode(); code != 0 {
		e.t.Fatalf("engine %s exited with code %d after SIGTERM; log tail:\n%s", e.name, code, e.LogTail(20))
	}
}

// logLines returns the log lines containing every one of subs (case-insensitive).
func (e *engine) logLines(subs ...string) []string {
	data, err := os.ReadFile(e.LogPath())
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		lower := strings.ToLower(line)
		all := true
		for _, s := range subs {
			if !strings.Contains(lower, strings.ToLower(s)) {
				all = false
				break
			}
		}
		if all && line != "" {
			out = append(out, line)
		}
	}
	return out
}

// fileTail returns the last n lines of the file at path, or why it could not be read.
func fileTail(path string, n int) string {
	tail, err := engineproc.TailFile(path, n)
	if err != nil {
		return err.Error()
	}
	return tail
}
