//go:build tools

// Package kube pins the sources of the node binaries that hack/kube/up.sh runs next to
// envtest's kube-apiserver and etcd: kubelet, kube-controller-manager, kube-scheduler,
// kube-proxy and kubectl, at the same Kubernetes version as hack/envtest. They are built
// from source through the Go module proxy by hack/kube/build.sh and cached outside the
// repository, keyed by version. Nothing in this module is imported by the project.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
