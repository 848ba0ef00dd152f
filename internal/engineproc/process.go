package engineproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// rssSampleInterval is how often the peak resident set size is read from /proc while
	// the process runs. VmHWM is a high-water mark, so only growth in the last interval
	// before an exit of its own can be missed.
	rssSampleInterval = 100 * time.Millisecond
	// readyPollInterval is the time between two /readyz requests in WaitReady.
	readyPollInterval = 100 * time.Millisecond
	// readyRequestTimeout bounds one /readyz request, so that an engine that accepted the
	// connection but hangs does not stall WaitReady past its own timeout.
	readyRequestTimeout = 2 * time.Second
	// exitedTailLines is how many log lines ExitedError quotes.
	exitedTailLines = 15
)

// ErrExited is wrapped by the errors of waits that ended because the process exited
// before it was asked to (see ExitedError).
var ErrExited = errors.New("the engine process exited")

// ErrKilledAfterGrace is wrapped by Stop's error when the process did not exit within
// its grace period after SIGTERM and was killed.
var ErrKilledAfterGrace = errors.New("killed after the grace period")

// Options say where the process's output goes. The zero value leaves cmd.Stdout and
// cmd.Stderr as the caller set them.
type Options struct {
	// LogPath, when set, is a file that stdout and stderr are appended to (created if it
	// does not exist); LogTail and ExitedError read it.
	LogPath string
	// Output, when set, receives stdout and stderr as well (after the log file, when
	// there is one). exec.Cmd writes both through one goroutine, so Output sees whole
	// writes in order but need not be safe for concurrent use by other writers.
	Output io.Writer
}

// Process is one started engine process. Its methods are safe for concurrent use.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{}
	waitErr error // set before done is closed
	// peakRSS is the highest VmHWM read, in bytes; stopping is set once Stop or Kill
	// signalled the process, after which peakRSS no longer changes (a benchmark measures
	// the run, not the drain).
	peakRSS  atomic.Int64
	stopping atomic.Bool
	// peakAnon is the highest RssAnon sampled, in bytes (see PeakAnonRSS).
	peakAnon atomic.Int64
}

// Start starts cmd (usually `kafka-mirror run --config ...`) in its own process group
// (and, on Linux, with SIGKILL as its parent-death signal), with its output sent where
// opts say, and samples its peak RSS until it exits or is stopped.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	var out []io.Writer
	var logFile *os.File
	if opts.LogPath != "" {
		f, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("while opening the engine log: %w", err)
		}
		logFile = f
		out = append(out, f)
	}
	if opts.Output != nil {
		out = append(out, opts.Output)
	}
	switch len(out) {
	case 1:
		cmd.Stdout, cmd.Stderr = out[0], out[0]
	case 2:
		w := io.MultiWriter(out...)
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("while starting the engine process: %w", err)
	}
	p := &Process{cmd: cmd, logPath: opts.LogPath, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	go p.sampleRSS()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Started is when the process was started.
func (p *Process) Started() time.Time { return p.started }

// LogPath is Options.LogPath.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has ended, for whatever reason.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not ended yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is the process's wait error once it has ended (nil for exit code 0, an
// *exec.ExitError otherwise); nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// ExitCode is the process's exit code once it has ended: 0 for a clean exit, -1 when a
// signal ended it or it could not be waited for. It is 0 while the process runs.
func (p *Process) ExitCode() int {
	err := p.Err()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		return -1
	}
}

// Signal sends sig to the process; a process that has already ended is not an error.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("while signalling the engine (pid %d) with %v: %w", p.Pid(), sig, err)
	}
	return nil
}

// Kill ends the process with SIGKILL and waits for it to go: no drain, no final
// commit, in-flight records gone.
func (p *Process) Kill() error {
	p.freezeRSS()
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("while killing the engine (pid %d): %w", p.Pid(), err)
	}
	<-p.done
	return nil
}

// Stop sends SIGTERM, the signal Kubernetes sends a pod, and waits up to grace for the
// engine to drain, commit and exit. It returns nil for exit code 0, an error wrapping the
// *exec.ExitError for another exit, and one wrapping ErrKilledAfterGrace when the
// process was still running after grace and had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	p.freezeRSS()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("while stopping the engine (pid %d): %w", p.Pid(), err)
	}
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("the engine (pid %d) exited with an error after SIGTERM: %w", p.Pid(), p.waitErr)
		}
		return nil
	case <-time.After(grace):
		_ = p.Kill()
		return fmt.Errorf("the engine (pid %d) did not stop within %s of SIGTERM and was %w", p.Pid(), grace, ErrKilledAfterGrace)
	}
}

// WaitReady polls http://address/readyz until it answers 200 OK. It fails when timeout
// passes, ctx ends, or the process exits first (an error wrapping ErrExited, with the
// log's tail).
func (p *Process) WaitReady(ctx context.Context, address string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return p.ExitedError()
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("the engine (pid %d) was not ready at http://%s/readyz within %s", p.Pid(), address, timeout)
		case <-tick.C:
		}
		if ready(ctx, address) {
			return nil
		}
	}
}

// ready reports whether http://address/readyz answers 200 OK.
func ready(ctx context.Context, address string) bool {
	ctx, cancel := context.WithTimeout(ctx, readyRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ExitedError describes a process that ended before it was asked to: it wraps ErrExited
// and quotes the wait error and the last lines of the log.
func (p *Process) ExitedError() error {
	return fmt.Errorf("%w early (%v); last log lines of %s:\n%s", ErrExited, p.Err(), p.logPath, p.LogTail(exitedTailLines))
}

// LogTail returns the last n lines of the log file, or "" when there is none.
func (p *Process) LogTail(n int) string {
	if p.logPath == "" {
		return ""
	}
	tail, _ := TailFile(p.logPath, n)
	return tail
}

// TailFile returns the last n lines of the file at path, without the final newline.
func TailFile(path string, n int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(data), "\n")
	if s == "" {
		return "", nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n"), nil
}

// PeakRSS is the process's peak resident set size in bytes (VmHWM from /proc, Linux
// only; 0 where it cannot be read), as last sampled before Stop or Kill. rusage's maxrss
// cannot be used: Go starts children with vfork semantics, so the kernel carries the
// parent's own peak RSS through exec into the child's maxrss.
func (p *Process) PeakRSS() int64 { return p.peakRSS.Load() }

// PeakAnonRSS is the highest anonymous resident memory (RssAnon from /proc: the heap,
// stacks and other private memory, without the binary's file-backed pages) sampled every
// rssSampleInterval before Stop or Kill. Unlike PeakRSS it is a sample, not a kernel
// high-water mark, so a peak shorter than the interval can be missed. It tells a
// process's own memory from its binary's size: a larger binary maps more file pages.
func (p *Process) PeakAnonRSS() int64 { return p.peakAnon.Load() }

// CPUTime is the user plus system CPU time the process used, once it has ended (CPU
// times, unlike maxrss, start at zero in the child); 0 while it runs.
func (p *Process) CPUTime() time.Duration {
	select {
	case <-p.done:
	default:
		return 0
	}
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// freezeRSS takes a last sample and stops further ones.
func (p *Process) freezeRSS() {
	if p.stopping.Load() {
		return
	}
	p.readRSS()
	p.stopping.Store(true)
}

// sampleRSS reads VmHWM every rssSampleInterval until the process ends.
func (p *Process) sampleRSS() {
	tick := time.NewTicker(rssSampleInterval)
	defer tick.Stop()
	p.readRSS()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
			p.readRSS()
		}
	}
}

// readRSS reads VmHWM and RssAnon once and keeps each if it is the highest so far.
func (p *Process) readRSS() {
	if p.stopping.Load() {
		return
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "VmHWM:" && f[0] != "RssAnon:") {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		peak := &p.peakRSS
		if f[0] == "RssAnon:" {
			peak = &p.peakAnon
		}
		for {
			cur := peak.Load()
			if kb*1024 <= cur || peak.CompareAndSwap(cur, kb*1024) {
				break
			}
		}
	}
}
