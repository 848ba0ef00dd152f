//go:build e2e

package e2e

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// supervisor restarts the engine whenever it exits, as a Deployment's pod does, so a
// test can see what an engine failure costs after the restart.
type supervisor struct {
	s       *scenario
	cfgPath string
	name    string

	mu       sync.Mutex
	cur      *engine
	exits    []string // "code N: last line" of each exit
	stopping bool
	done     chan struct{}
}

// restartDelay stands in for the pod's restart back-off.
const restartDelay = time.Second

// supervise starts the engine and keeps it running until stop.
func (s *scenario) supervise(name string, cfg config.Config) *supervisor {
	s.t.Helper()
	if cfg.Metrics.Address == "" || cfg.Metrics.Address == "0" {
		cfg.Metrics.Address = e2eharness.FreeAddr(s.t)
	}
	sv := &supervisor{s: s, cfgPath: e2eharness.WriteConfig(s.t, s.dir, name, cfg), name: name, done: make(chan struct{})}
	sv.cur = e2eharness.StartEngine(s.t, fmt.Sprintf("%s-0", name), sv.cfgPath)
	go sv.loop()
	return sv
}

func (sv *supervisor) loop() {
	defer close(sv.done)
	for i := 1; ; i++ {
		sv.mu.Lock()
		e := sv.cur
		sv.mu.Unlock()
		<-e.Done()
		sv.mu.Lock()
		if sv.stopping {
			sv.mu.Unlock()
			return
		}
		sv.exits = append(sv.exits, fmt.Sprintf("code %d: %s", e.ExitCode(), e.LogTail(1)))
		sv.mu.Unlock()
		time.Sleep(restartDelay)
		next, err := e2eharness.LaunchEngine(sv.s.t, fmt.Sprintf("%s-%d", sv.name, i), sv.cfgPath)
		sv.mu.Lock()
		if err != nil || sv.stopping {
			sv.mu.Unlock()
			if next != nil {
				_ = next.Kill()
			}
			return
		}
		sv.cur = next
		sv.mu.Unlock()
	}
}

// restarts returns the exits so far.
func (sv *supervisor) restarts() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]string(nil), sv.exits...)
}

// current returns the running engine process.
func (sv *supervisor) current() *engine {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.cur
}

// stop stops supervising and SIGTERMs the current engine, failing the test if it does
// not exit cleanly.
func (sv *supervisor) stop(timeout time.Duration) {
	sv.s.t.Helper()
	sv.mu.Lock()
	sv.stopping = true
	e := sv.cur
	sv.mu.Unlock()
	if e.Running() {
		e.StopCleanly(timeout)
	} else {
		_ = e.Signal(syscall.SIGTERM)
	}
	<-sv.done
}
