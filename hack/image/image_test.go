package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	testVersion = "v9.8.7-image-test"
	testCommit  = "abc1234"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// testBinary builds kafka-mirror once per test run the way `make build` does: CGO off,
// -trimpath and the Makefile's own LDFLAGS, stamped with testVersion and testCommit.
func testBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		makefile, err := os.ReadFile("../../Makefile")
		if err != nil {
			buildErr = err
			return
		}
		line := regexp.MustCompile(`(?m)^LDFLAGS :?= (.*)$`).FindSubmatch(makefile)
		if line == nil {
			buildErr = errors.New("the Makefile defines no LDFLAGS")
			return
		}
		ldflags := strings.NewReplacer("$(VERSION)", testVersion, "$(COMMIT)", testCommit).Replace(string(line[1]))
		dir, err := os.MkdirTemp("", "image-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "kafka-mirror")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", builtBin, ".")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func testSpec(t *testing.T) Spec {
	return Spec{
		Binary:  testBinary(t),
		CACerts: hostCACertificates,
		Version: testVersion,
		Commit:  testCommit,
		Arch:    runtime.GOARCH,
		Created: time.Unix(1700000000, 0).UTC(),
	}
}

func build(t *testing.T, s Spec) v1.Image {
	t.Helper()
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageFile is one file of the flattened image.
type imageFile struct {
	header *tar.Header
	data   []byte
}

// files returns the image's flattened file system by path (no leading slash, no trailing one).
func files(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]imageFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Clean(h.Name), "/")] = imageFile{header: h, data: data}
	}
}

// TestImageConfig checks the config a kubelet reads: the numeric non-root user that
// runAsNonRoot verifies, the entrypoint the chart's `args` follow, and the labels.
func TestImageConfig(t *testing.T) {
	img := build(t, testSpec(t))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	manifestType, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("the image has %d layers, want 1", len(m.Layers))
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"user", cf.Config.User, "65532:65532"},
		{"entrypoint", cf.Config.Entrypoint, []string{"/usr/local/bin/kafka-mirror"}},
		{"cmd", cf.Config.Cmd, []string(nil)},
		{"working dir", cf.Config.WorkingDir, "/home/nonroot"},
		{"SSL_CERT_FILE", slices.Contains(cf.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"), true},
		{"os", cf.OS, "linux"},
		{"architecture", cf.Architecture, runtime.GOARCH},
		{"created", cf.Created.Time.Unix(), int64(1700000000)},
		{"manifest media type", manifestType, types.OCIManifestSchema1},
		{"config media type", m.Config.MediaType, types.OCIConfigJSON},
		{"layer media type", m.Layers[0].MediaType, types.OCILayer},
		{"label version", cf.Config.Labels["org.opencontainers.image.version"], testVersion},
		{"label revision", cf.Config.Labels["org.opencontainers.image.revision"], testCommit},
		{"label title", cf.Config.Labels["org.opencontainers.image.title"], "kafka-mirror"},
		{"label source", cf.Config.Labels["org.opencontainers.image.source"], "https://github.com/kafka-mirror/kafka-mirror-operator"},
		{"label created", cf.Config.Labels["org.opencontainers.image.created"], "2023-11-14T22:13:20Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !equal(tc.got, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.name, tc.got, tc.want)
			}
		})
	}
}

func equal(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		return slices.Equal(as, bs)
	}
	return a == b
}

// TestImageFiles checks the image holds exactly the binary, the CA bundle and the user
// database: no shell, no package manager, and a binary that needs no loader.
func TestImageFiles(t *testing.T) {
	fs := files(t, build(t, testSpec(t)))
	var paths []string
	for p := range fs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{
		"etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt",
		"home", "home/nonroot", "tmp", "usr", "usr/local", "usr/local/bin", "usr/local/bin/kafka-mirror",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("the image holds %v, want exactly %v", paths, want)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
		if _, ok := fs[shell]; ok {
			t.Errorf("the image holds a shell at /%s", shell)
		}
	}

	hostCA, err := os.ReadFile(hostCACertificates)
	if err != nil {
		t.Fatal(err)
	}
	if ca := fs["etc/ssl/certs/ca-certificates.crt"]; !bytes.Equal(ca.data, hostCA) || ca.header.Mode != 0o644 {
		t.Errorf("the CA bundle is %d bytes, mode %o; want the host's %d bytes, mode 644", len(ca.data), ca.header.Mode, len(hostCA))
	}
	if !bytes.Contains(hostCA, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("the host's CA bundle %s holds no certificate", hostCACertificates)
	}
	if !strings.Contains(string(fs["etc/passwd"].data), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user with UID and GID 65532:\n%s", fs["etc/passwd"].data)
	}
	if !strings.Contains(string(fs["etc/group"].data), "\nnonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot group 65532:\n%s", fs["etc/group"].data)
	}
	if h := fs["home/nonroot"].header; h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("/home/nonroot is owned by %d:%d, want 65532:65532", h.Uid, h.Gid)
	}
	for p, f := range fs {
		if p != "home/nonroot" && (f.header.Uid != 0 || f.header.Gid != 0) {
			t.Errorf("/%s is owned by %d:%d, want root (the nonroot user must not be able to change it)", p, f.header.Uid, f.header.Gid)
		}
		if !f.header.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("/%s has mtime %v, want the fixed creation time", p, f.header.ModTime)
		}
	}

	bin := fs["usr/local/bin/kafka-mirror"]
	if bin.header.Mode != 0o755 {
		t.Errorf("the binary has mode %o, want 755", bin.header.Mode)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("the image's binary is not ELF: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the image's binary has a PT_INTERP header: it needs a dynamic loader the image does not have")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's binary needs shared libraries %v", libs)
	}
}

// TestImageBinaryIsStamped runs the image's binary and checks it reports the version and
// commit the image's labels carry.
func TestImageBinaryIsStamped(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kafka-mirror")
	if err := os.WriteFile(bin, files(t, build(t, testSpec(t)))["usr/local/bin/kafka-mirror"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-mirror version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), testVersion) || !strings.Contains(string(out), testCommit) {
		t.Errorf("kafka-mirror version printed %q, want %s and %s", out, testVersion, testCommit)
	}
}

// TestImageIsReproducible builds the image twice from the same inputs, and writes it
// twice, and checks the digest and the tarball's bytes do not change; a different
// creation time must change the digest (the timestamps really are in it).
func TestImageIsReproducible(t *testing.T) {
	s := testSpec(t)
	var digests []v1.Hash
	var tarballs [][]byte
	for i := range 2 {
		img := build(t, s)
		w, err := Write(img, filepath.Join(t.TempDir(), "out"), "example.com/kafka-mirror:test")
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadLayout(w.Layout)
		if err != nil {
			t.Fatal(err)
		}
		d, err := back.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d != w.Digest {
			t.Errorf("build %d: the layout holds %s, Write reported %s", i, d, w.Digest)
		}
		tb, err := os.ReadFile(w.Tarball)
		if err != nil {
			t.Fatal(err)
		}
		digests, tarballs = append(digests, d), append(tarballs, tb)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds from the same inputs gave digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Errorf("two builds from the same inputs gave different tarballs (%d and %d bytes)", len(tarballs[0]), len(tarballs[1]))
	}
	later := s
	later.Created = s.Created.Add(time.Second)
	d, err := build(t, later).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d == digests[0] {
		t.Errorf("a different creation time gave the same digest %s", d)
	}
}

// TestBuildRefusesDynamicBinary: a binary that needs a loader would not start in the image.
func TestBuildRefusesDynamicBinary(t *testing.T) {
	dynamic := "/bin/true"
	f, err := elf.Open(dynamic)
	if err != nil {
		t.Skipf("no %s to try: %v", dynamic, err)
	}
	hasInterp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	f.Close()
	if !hasInterp {
		t.Skipf("%s is static on this host", dynamic)
	}
	s := testSpec(t)
	s.Binary = dynamic
	if _, err := Build(s); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("Build(%s) = %v, want an error asking for CGO_ENABLED=0", dynamic, err)
	}
}

// TestUnpack unpacks the image the way make image-run does and checks owners and modes
// survive, since runc runs the rootfs as it finds it.
func TestUnpack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking sets file owners, which needs root")
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := Unpack(build(t, testSpec(t)), dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		mode os.FileMode
		uid  int
	}{
		{"usr/local/bin/kafka-mirror", 0o755, 0},
		{"etc/passwd", 0o644, 0},
		{"home/nonroot", os.ModeDir | 0o700, 65532},
		{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			fi, err := os.Lstat(filepath.Join(dir, tc.path))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tc.mode {
				t.Errorf("mode %v, want %v", fi.Mode(), tc.mode)
			}
			if uid := ownerUID(fi); uid != tc.uid {
				t.Errorf("owner %d, want %d", uid, tc.uid)
			}
		})
	}
}
