// Command image builds the kafka-mirror OCI image without a container engine and without
// pulling a base image (make image), and unpacks it into a root filesystem for runc
// (make image-run).
//
// The image keeps the Dockerfile's promises, which the chart's securityContext relies on:
// the static binary at /usr/local/bin/kafka-mirror as the entrypoint, user 65532:65532
// (numeric, so the kubelet can check runAsNonRoot), CA certificates, an /etc/passwd entry
// for nonroot, no shell, and the org.opencontainers.image.* labels. Every timestamp is
// fixed, so the same binary gives the same digest on every build.
//
//	go run . build --binary ../../bin/kafka-mirror --version v1 --commit abc --out ../../bin/image
//	go run . unpack --layout ../../bin/image/oci --rootfs /tmp/rootfs
//	go run . digest --layout ../../bin/image/oci
//	go run . pause --binary ../../bin/image/pause --out ../../bin/image/pause.tar   (make kube-up's pod sandbox)
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image build|unpack|digest|pause [flags]")
	}
	switch args[0] {
	case "build":
		return runBuild(args[1:])
	case "unpack":
		return runUnpack(args[1:])
	case "digest":
		return runDigest(args[1:])
	case "pause":
		return runPause(args[1:])
	default:
		return fmt.Errorf("unknown command %q: want build, unpack, digest or pause", args[0])
	}
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var s Spec
	fs.StringVar(&s.Binary, "binary", "bin/kafka-mirror", "the static kafka-mirror binary to package")
	fs.StringVar(&s.CACerts, "ca-certificates", hostCACertificates, "the CA bundle to install at "+caPath)
	fs.StringVar(&s.Version, "version", "dev", "org.opencontainers.image.version label")
	fs.StringVar(&s.Commit, "commit", "unknown", "org.opencontainers.image.revision label")
	fs.StringVar(&s.Arch, "arch", "amd64", "the binary's GOARCH, recorded in the image config")
	created := fs.Int64("created", 0, "creation time of the image and its files, in Unix seconds (SOURCE_DATE_EPOCH)")
	out := fs.String("out", "bin/image", "directory for the OCI layout (oci/) and the tarball (kafka-mirror.tar)")
	ref := fs.String("ref", "ghcr.io/kafka-mirror/kafka-mirror:dev", "the reference the tarball and the layout name the image by")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s.Created = time.Unix(*created, 0).UTC()
	img, err := Build(s)
	if err != nil {
		return err
	}
	w, err := Write(img, *out, *ref)
	if err != nil {
		return err
	}
	fmt.Printf("Built %s %s\n  OCI layout: %s\n  tarball:    %s\n", *ref, w.Digest, w.Layout, w.Tarball)
	return nil
}

func runUnpack(args []string) error {
	fs := flag.NewFlagSet("unpack", flag.ContinueOnError)
	layoutDir := fs.String("layout", "bin/image/oci", "the OCI layout that make image wrote")
	rootfs := fs.String("rootfs", "", "the directory to unpack the image's files into (replaced)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rootfs == "" {
		return fmt.Errorf("--rootfs is required")
	}
	img, err := ReadLayout(*layoutDir)
	if err != nil {
		return err
	}
	return Unpack(img, *rootfs)
}

func runDigest(args []string) error {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	layoutDir := fs.String("layout", "bin/image/oci", "the OCI layout that make image wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	img, err := ReadLayout(*layoutDir)
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("while computing the image digest: %w", err)
	}
	fmt.Println(d)
	return nil
}
