package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refNameAnnotation names an image in an OCI layout's index (what `ctr images import
// --index-name` and skopeo's oci:DIR:REF read).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Written says where Write put the image.
type Written struct {
	Digest  v1.Hash
	Layout  string // an OCI image layout directory
	Tarball string // a docker-archive tarball, for `ctr images import` or `docker load`
}

// Write replaces out/oci with an OCI layout holding only img, tagged ref, and writes
// out/kafka-mirror.tar.
func Write(img v1.Image, out, ref string) (Written, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Written{}, fmt.Errorf("while parsing the reference %q: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Written{}, fmt.Errorf("while computing the image digest: %w", err)
	}
	w := Written{Digest: digest, Layout: filepath.Join(out, "oci"), Tarball: filepath.Join(out, "kafka-mirror.tar")}
	if err := os.RemoveAll(w.Layout); err != nil {
		return Written{}, fmt.Errorf("while removing the previous layout: %w", err)
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return Written{}, fmt.Errorf("while creating the OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.String()})); err != nil {
		return Written{}, fmt.Errorf("while writing the image into the OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(w.Tarball, tag, img); err != nil {
		return Written{}, fmt.Errorf("while writing the image tarball: %w", err)
	}
	return w, nil
}

// ReadLayout returns the one image of an OCI layout written by Write.
func ReadLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("while opening the OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("while reading the OCI layout's index: %w", err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("the OCI layout %s holds %d images, want 1 (run make image)", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("while reading the image %s: %w", m.Manifests[0].Digest, err)
	}
	return img, nil
}

// Unpack replaces dir with the image's files, with their modes and owners (chown needs
// root, which runc needs too), as a container runtime would unpack them.
func Unpack(img v1.Image, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("while removing the previous root filesystem: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("while creating the root filesystem: %w", err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("while reading the image's files: %w", err)
		}
		rel := filepath.Clean(h.Name)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("the image holds a path outside its root: %q", h.Name)
		}
		target := filepath.Join(dir, rel)
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("while creating %s: %w", rel, err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return fmt.Errorf("while creating %s: %w", rel, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("while writing %s: %w", rel, err)
			}
		default:
			return fmt.Errorf("the image holds %s of tar type %q, which make image never writes", rel, h.Typeflag)
		}
		if err := os.Chmod(target, mode); err != nil {
			return fmt.Errorf("while setting the mode of %s: %w", rel, err)
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
			return fmt.Errorf("while setting the owner of %s: %w", rel, err)
		}
	}
}
