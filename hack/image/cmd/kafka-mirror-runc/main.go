// Command kafka-mirror-runc runs `kafka-mirror ARGS...` from the image make image built,
// in a runc container configured as the chart's securityContext configures the pod: UID
// and GID 65532, read-only root file system, no capabilities, no new privileges, a seccomp
// filter. It takes the place of bin/kafka-mirror where a harness starts the binary
// (KAFKA_MIRROR_BIN=bin/image/kafka-mirror-runc make e2e ...): it replaces itself with
// `runc run`, which forwards every signal to the container's process and exits with its
// exit code, so SIGTERM reaches kafka-mirror as the kubelet's would. Files named on the
// command line (the config) reach the container as a ConfigMap volume would: a read-only
// copy, mode 0644, at the same path.
//
// Environment:
//
//	KAFKA_MIRROR_IMAGE       the OCI layout (bin/image/oci), for the entrypoint, env and working directory
//	KAFKA_MIRROR_ROOTFS      the image unpacked by `image unpack` (shared read-only by every container)
//	KAFKA_MIRROR_RUNC_ROOT   runc's state directory (default /run/kafka-mirror-runc)
//	KAFKA_MIRROR_RUNC_BUNDLES where each container's config.json goes (default $TMPDIR/kafka-mirror-runc)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

const defaultRuncRoot = "/run/kafka-mirror-runc"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-mirror-runc:", err)
		os.Exit(125) // what container runtimes exit with when the container could not start
	}
}

func run(args []string) error {
	layoutDir, rootfs := os.Getenv("KAFKA_MIRROR_IMAGE"), os.Getenv("KAFKA_MIRROR_ROOTFS")
	if layoutDir == "" || rootfs == "" {
		return fmt.Errorf("KAFKA_MIRROR_IMAGE and KAFKA_MIRROR_ROOTFS must be set (make image-run sets them)")
	}
	rootfs, err := filepath.Abs(rootfs)
	if err != nil {
		return err
	}
	cfg, err := imageConfig(layoutDir)
	if err != nil {
		return err
	}
	runcRoot := envOr("KAFKA_MIRROR_RUNC_ROOT", defaultRuncRoot)
	bundles := envOr("KAFKA_MIRROR_RUNC_BUNDLES", filepath.Join(os.TempDir(), "kafka-mirror-runc"))
	// The PID survives the exec below, so it names the container uniquely while it runs.
	id := fmt.Sprintf("kafka-mirror-%d", os.Getpid())
	bundle := filepath.Join(bundles, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return fmt.Errorf("while creating the bundle: %w", err)
	}
	volumes, err := projectFiles(args, bundle)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(containerSpec(cfg, rootfs, id, args, volumes), "", "  ")
	if err != nil {
		return fmt.Errorf("while rendering the runc config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("while writing the runc config: %w", err)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return fmt.Errorf("while looking for runc (apt-get install runc): %w", err)
	}
	argv := []string{"runc", "--root", runcRoot, "run", "--bundle", bundle, id}
	if err := syscall.Exec(runc, argv, os.Environ()); err != nil {
		return fmt.Errorf("while starting runc: %w", err)
	}
	return nil
}

// imageConfig reads the entrypoint, env and working directory of the layout's one image.
func imageConfig(dir string) (v1.Config, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return v1.Config{}, fmt.Errorf("while opening the OCI layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		return v1.Config{}, fmt.Errorf("the OCI layout %s does not hold one image (run make image): %v", dir, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return v1.Config{}, fmt.Errorf("while reading the image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Config{}, fmt.Errorf("while reading the image config: %w", err)
	}
	return cf.Config, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
