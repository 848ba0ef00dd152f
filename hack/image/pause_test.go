package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// pauseBinary builds hack/kube/pause the way hack/kube/up.sh does.
func pauseBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./pause")
	cmd.Dir = "../kube"
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./pause: %v\n%s", err, out)
	}
	return bin
}

// TestPauseImage checks the pod sandbox image of make kube-up: /pause alone, as the
// entrypoint, the pause user, static.
func TestPauseImage(t *testing.T) {
	img, err := BuildPause(pauseBinary(t), time.Unix(1700000000, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/pause" {
		t.Errorf("entrypoint %v, want [/pause]", got)
	}
	if cf.Config.User != "65535:65535" || cf.OS != "linux" {
		t.Errorf("user %q os %q, want 65535:65535 linux", cf.Config.User, cf.OS)
	}
	tr := tar.NewReader(mutate.Extract(img))
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Mode != 0o755 || h.Uid != 0 {
			t.Errorf("%s: mode %o uid %d, want 0755 root", h.Name, h.Mode, h.Uid)
		}
	}
	if len(names) != 1 || names[0] != "pause" {
		t.Errorf("image files %v, want [pause]", names)
	}
	if _, err := BuildPause("/bin/true", time.Unix(0, 0)); err == nil {
		t.Error("BuildPause accepted the dynamic /bin/true")
	}
}

// TestPauseExitsOnSIGTERM checks that the sandbox stops at once when the runtime stops it.
func TestPauseExitsOnSIGTERM(t *testing.T) {
	cmd := exec.Command(pauseBinary(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited before being told to: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause still running 30 s after SIGTERM")
	}
}
