//go:build tools

// Package envtest pins the sources of the kube-apiserver and etcd binaries that
// envtest runs. They are built from source through the Go module proxy by
// hack/envtest.sh and cached outside the repository, keyed by version.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
