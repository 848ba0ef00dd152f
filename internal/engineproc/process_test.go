package engineproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// The test binary doubles as a fake engine: with fakeEngineEnv set, TestMain runs
// fakeEngine instead of the tests. It is started the way the real engine is, so the
// tests cover real processes, signals and exit codes.
const (
	fakeEngineEnv = "ENGINEPROC_FAKE_ENGINE"
	// fakeAddrEnv is the address the fake serves /readyz on.
	fakeAddrEnv = "ENGINEPROC_FAKE_ADDR"
	// fakeTermCodeEnv is the exit code after SIGTERM; "ignore" makes it ignore SIGTERM.
	fakeTermCodeEnv = "ENGINEPROC_FAKE_TERM_CODE"
	// fakeExitEnv makes the fake exit at once with this code, never ready.
	fakeExitEnv = "ENGINEPROC_FAKE_EXIT"
	// fakeLines is how many log lines the fake writes before it is ready.
	fakeLines = 30
	// fakeReadyAfter is how many /readyz requests answer 503 before the first 200.
	fakeReadyAfter = 2
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEngineEnv) != "" {
		os.Exit(fakeEngine())
	}
	os.Exit(m.Run())
}

// fakeEngine writes fakeLines log lines to stdout and one to stderr, serves /readyz
// (503 fakeReadyAfter times, then 200) and exits on SIGTERM with the configured code.
func fakeEngine() int {
	if code := os.Getenv(fakeExitEnv); code != "" {
		fmt.Println("fake engine: failing at once")
		n, _ := strconv.Atoi(code)
		return n
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for i := range fakeLines {
		fmt.Printf("fake engine: line %d\n", i)
	}
	fmt.Fprintln(os.Stderr, "fake engine: on stderr")
	var mu sync.Mutex
	asked := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if asked++; asked <= fakeReadyAfter {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	l, err := net.Listen("tcp", os.Getenv(fakeAddrEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() { _ = http.Serve(l, mux) }()
	code := os.Getenv(fakeTermCodeEnv)
	for range term {
		if code == "ignore" {
			fmt.Println("fake engine: ignored SIGTERM")
			continue
		}
		fmt.Println("fake engine: stopped")
		n, _ := strconv.Atoi(code)
		return n
	}
	return 0
}

// startFake starts the fake engine with its log in a temporary directory and extra env.
func startFake(t *testing.T, output *testutil.SyncBuffer, env ...string) (*Process, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), append([]string{fakeEngineEnv + "=1", fakeAddrEnv + "=" + addr}, env...)...)
	opts := Options{LogPath: filepath.Join(t.TempDir(), "engine.log")}
	if output != nil {
		opts.Output = output
	}
	p, err := Start(cmd, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p, addr
}

// readyTimeout is a generous ceiling for the fake to start and answer /readyz on a busy
// machine: it needs fakeReadyAfter+1 polls of readyPollInterval after starting.
const readyTimeout = 30 * time.Second

func TestStopAfterReady(t *testing.T) {
	tests := map[string]struct {
		termCode string
		wantCode int
	}{
		"a clean drain exits 0":  {termCode: "0", wantCode: 0},
		"a failed drain exits 3": {termCode: "3", wantCode: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out testutil.SyncBuffer
			p, addr := startFake(t, &out, fakeTermCodeEnv+"="+tc.termCode)
			if err := p.WaitReady(context.Background(), addr, readyTimeout); err != nil {
				t.Fatalf("WaitReady: %v", err)
			}
			if !p.Running() || p.Err() != nil || p.ExitCode() != 0 || p.CPUTime() != 0 {
				t.Fatalf("ready process: Running=%v Err=%v ExitCode=%d CPUTime=%v, want true, nil, 0, 0",
					p.Running(), p.Err(), p.ExitCode(), p.CPUTime())
			}
			err := p.Stop(readyTimeout)
			if tc.wantCode == 0 && err != nil {
				t.Fatalf("Stop = %v, want nil", err)
			}
			var ee *exec.ExitError
			if tc.wantCode != 0 && (!errors.As(err, &ee) || ee.ExitCode() != tc.wantCode) {
				t.Fatalf("Stop = %v, want an *exec.ExitError with code %d", err, tc.wantCode)
			}
			if p.Running() || p.ExitCode() != tc.wantCode {
				t.Errorf("after Stop: Running=%v ExitCode=%d, want false, %d", p.Running(), p.ExitCode(), tc.wantCode)
			}
			tail := p.LogTail(3)
			want := fmt.Sprintf("fake engine: line %d\nfake engine: on stderr\nfake engine: stopped", fakeLines-1)
			if tail != want {
				t.Errorf("LogTail(3) = %q, want %q", tail, want)
			}
			if got := strings.Count(out.String(), "\n"); got != fakeLines+2 {
				t.Errorf("Output received %d lines, want %d (every line of the log):\n%s", got, fakeLines+2, out.String())
			}
			if p.CPUTime() <= 0 {
				t.Errorf("CPUTime = %v after exit, want > 0", p.CPUTime())
			}
			if p.PeakRSS() < 1<<20 {
				t.Errorf("PeakRSS = %d bytes, want at least 1 MiB (read from /proc/<pid>/status)", p.PeakRSS())
			}
			if anon := p.PeakAnonRSS(); anon <= 0 || anon > p.PeakRSS() {
				t.Errorf("PeakAnonRSS = %d bytes, want more than 0 and at most PeakRSS %d", anon, p.PeakRSS())
			}
		})
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p, addr := startFake(t, nil, fakeTermCodeEnv+"=ignore")
	if err := p.WaitReady(context.Background(), addr, readyTimeout); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	// The fake ignores SIGTERM, so Stop must reach the kill whatever the grace.
	err := p.Stop(100 * time.Millisecond)
	if !errors.Is(err, ErrKilledAfterGrace) {
		t.Fatalf("Stop = %v, want ErrKilledAfterGrace", err)
	}
	if p.Running() || p.ExitCode() != -1 {
		t.Errorf("after the kill: Running=%v ExitCode=%d, want false, -1", p.Running(), p.ExitCode())
	}
	if !strings.HasSuffix(p.LogTail(1), "ignored SIGTERM") {
		t.Errorf("LogTail(1) = %q, want the fake's answer to SIGTERM", p.LogTail(1))
	}
}

func TestKill(t *testing.T) {
	p, addr := startFake(t, nil, fakeTermCodeEnv+"=0")
	if err := p.WaitReady(context.Background(), addr, readyTimeout); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is still open after Kill returned")
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || p.ExitCode() != -1 {
		t.Errorf("after Kill: Err=%v ExitCode=%d, want an *exec.ExitError and -1 (ended by a signal)", p.Err(), p.ExitCode())
	}
	if err := p.Kill(); err != nil {
		t.Errorf("a second Kill = %v, want nil (the process is already gone)", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("Signal after the exit = %v, want nil", err)
	}
}

func TestWaitReadyReportsAnEarlyExit(t *testing.T) {
	p, addr := startFake(t, nil, fakeExitEnv+"=7")
	err := p.WaitReady(context.Background(), addr, readyTimeout)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitReady = %v, want ErrExited", err)
	}
	if !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "fake engine: failing at once") {
		t.Errorf("WaitReady's error = %q, want the exit status and the log's tail", err)
	}
	if p.ExitCode() != 7 {
		t.Errorf("ExitCode = %d, want 7", p.ExitCode())
	}
}

func TestWaitReadyTimesOut(t *testing.T) {
	p, _ := startFake(t, nil, fakeTermCodeEnv+"=0")
	// Nothing listens on a port reserved and released here.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := l.Addr().String()
	l.Close()
	err = p.WaitReady(context.Background(), nobody, 300*time.Millisecond)
	if err == nil || errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("WaitReady = %v, want a not-ready timeout", err)
	}
	if !p.Running() {
		t.Error("the process ended; WaitReady must not stop it")
	}
}

func TestTailFile(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		content string
		n       int
		want    string
	}{
		"fewer lines than asked": {content: "a\nb\n", n: 5, want: "a\nb"},
		"the last n lines":       {content: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
		"no final newline":       {content: "a\nb", n: 1, want: "b"},
		"empty":                  {content: "", n: 3, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := TailFile(path, tc.n)
			if err != nil || got != tc.want {
				t.Errorf("TailFile(%d) = %q, %v; want %q", tc.n, got, err, tc.want)
			}
		})
	}
	if _, err := TailFile(filepath.Join(dir, "missing"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TailFile of a missing file = %v, want os.ErrNotExist", err)
	}
}
