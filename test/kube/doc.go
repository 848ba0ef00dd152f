// Package kube runs the product on the real single-node cluster of `make kube-up`
// (hack/kube): the chart installed with helm, the operator as a pod, a KafkaMirror mirrored
// and audited through scaling, a rolling change and a forced pod delete, bad credentials,
// helm upgrade and uninstall, and `kubectl apply -k config/default`. The tests carry the
// build tag kube; `make e2e-kube` runs them inside the node's network namespace.
// docs/reliability.md has the results.
package kube
