package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The paths and identity the Dockerfile's distroless/static:nonroot base provides, and the
// chart's securityContext (runAsUser/runAsGroup 65532, runAsNonRoot) assumes.
const (
	binaryPath         = "/usr/local/bin/kafka-mirror"
	caPath             = "/etc/ssl/certs/ca-certificates.crt"
	hostCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	nonrootID          = 65532
	nonrootHome        = "/home/nonroot"
	imageUser          = "65532:65532"
	imagePath          = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	imageSource        = "https://github.com/kafka-mirror/kafka-mirror-operator"
	imageTitle         = "kafka-mirror"
	imageDescription   = "Mirror Kafka topics between clusters without losing data: operator and engine"
)

// The only users and groups in the image, as distroless/static:nonroot has them; no login
// shell exists, so none is named.
const (
	passwdFile = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	groupFile = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// Spec is what one image is built from.
type Spec struct {
	// Binary is the static kafka-mirror binary (CGO_ENABLED=0); Build refuses a dynamic one.
	Binary string
	// CACerts is the PEM bundle installed at /etc/ssl/certs/ca-certificates.crt.
	CACerts string
	// Version and Commit fill the org.opencontainers.image.version and .revision labels.
	Version, Commit string
	// Arch is the binary's GOARCH.
	Arch string
	// Created stamps the image config, its history and every file, so that builds repeat.
	Created time.Time
}

// Build returns the image: one layer holding the binary, the CA bundle and the user
// database, with the Dockerfile's user, entrypoint and labels.
func Build(s Spec) (v1.Image, error) {
	if err := checkStatic(s.Binary); err != nil {
		return nil, err
	}
	layerTar, err := rootfsTar(s)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("while making the image layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: s.Created}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "hack/image build", Comment: "kafka-mirror, CA certificates, nonroot user"},
	})
	if err != nil {
		return nil, fmt.Errorf("while adding the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("while reading the image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = s.Arch, "linux"
	cf.Created = created
	cf.Config = v1.Config{
		User:       imageUser,
		Entrypoint: []string{binaryPath},
		WorkingDir: nonrootHome,
		Env:        []string{"PATH=" + imagePath, "SSL_CERT_FILE=" + caPath},
		Labels: map[string]string{
			"org.opencontainers.image.title":       imageTitle,
			"org.opencontainers.image.description": imageDescription,
			"org.opencontainers.image.source":      imageSource,
			"org.opencontainers.image.version":     s.Version,
			"org.opencontainers.image.revision":    s.Commit,
			"org.opencontainers.image.created":     s.Created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("while writing the image config: %w", err)
	}
	return img, nil
}

// checkStatic fails unless path is an ELF executable with no program interpreter and no
// shared libraries: the image has no libc and no dynamic loader to run anything else.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("while reading the binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the binary %s is dynamically linked (it has a PT_INTERP program header): build it with CGO_ENABLED=0", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("the binary %s needs shared libraries %v: build it with CGO_ENABLED=0", path, libs)
	}
	return nil
}

// entry is one file or directory of the image.
type entry struct {
	path string // relative, no leading slash
	mode int64
	uid  int
	data []byte // nil for a directory
}

// rootfsTar returns the layer as an uncompressed tar: directories before their contents,
// root-owned except the nonroot home, every timestamp s.Created.
func rootfsTar(s Spec) ([]byte, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("while reading the binary: %w", err)
	}
	ca, err := os.ReadFile(s.CACerts)
	if err != nil {
		return nil, fmt.Errorf("while reading the CA certificates: %w", err)
	}
	entries := []entry{
		{path: "etc", mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(groupFile)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwdFile)},
		{path: "etc/ssl", mode: 0o755},
		{path: "etc/ssl/certs", mode: 0o755},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{path: "home", mode: 0o755},
		{path: "home/nonroot", mode: 0o700, uid: nonrootID},
		{path: "tmp", mode: 0o1777},
		{path: "usr", mode: 0o755},
		{path: "usr/local", mode: 0o755},
		{path: "usr/local/bin", mode: 0o755},
		{path: "usr/local/bin/kafka-mirror", mode: 0o755, data: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: s.Created,
			Format:  tar.FormatPAX,
		}
		if e.data == nil {
			h.Typeflag, h.Name = tar.TypeDir, e.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("while writing %s to the layer: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("while writing %s to the layer: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("while closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
