package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pauseUser is the user registry.k8s.io/pause runs as.
const pauseUser = "65535:65535"

// runPause writes the pod sandbox image of make kube-up (hack/kube): the static binary of
// hack/kube/pause at /pause as the entrypoint, user 65535, as a docker-archive tarball for
// `ctr images import`. No registry is reachable here, so registry.k8s.io/pause cannot be
// pulled.
func runPause(args []string) error {
	fs := flag.NewFlagSet("pause", flag.ContinueOnError)
	binary := fs.String("binary", "", "the static pause binary (hack/kube/pause)")
	out := fs.String("out", "bin/image/pause.tar", "the docker-archive tarball to write")
	ref := fs.String("ref", "localhost/kafka-mirror/pause:3.10", "the reference the tarball names the image by")
	created := fs.Int64("created", 0, "creation time of the image and its file, in Unix seconds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	img, err := BuildPause(*binary, time.Unix(*created, 0).UTC())
	if err != nil {
		return err
	}
	tag, err := name.NewTag(*ref)
	if err != nil {
		return fmt.Errorf("while parsing the reference %q: %w", *ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("while creating the output directory: %w", err)
	}
	if err := tarball.WriteToFile(*out, tag, img); err != nil {
		return fmt.Errorf("while writing the pause image tarball: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("while computing the pause image digest: %w", err)
	}
	fmt.Printf("Built %s %s\n  tarball: %s\n", tag, digest, *out)
	return nil
}

// BuildPause returns a one-layer image holding only the static binary at /pause.
func BuildPause(binary string, created time.Time) (v1.Image, error) {
	if err := checkStatic(binary); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("while reading the pause binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := &tar.Header{Name: "pause", Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(bin)), ModTime: created, Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return nil, fmt.Errorf("while writing the pause layer: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("while writing the pause layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("while closing the pause layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("while making the pause layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image pause"},
	})
	if err != nil {
		return nil, fmt.Errorf("while adding the pause layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("while reading the pause image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{User: pauseUser, Entrypoint: []string{"/pause"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("while writing the pause image config: %w", err)
	}
	return img, nil
}
