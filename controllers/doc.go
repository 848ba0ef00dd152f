// Package controllers holds the KafkaMirror reconciler and the manager that runs it.
//
// Reconcile is an outline of named steps: validate the spec (the engine's own
// validation, paths rooted at spec), sync the target topics (mirror/topics against the
// real clusters), then write the children (ConfigMap with mirror.yaml, Deployment,
// metrics Service, PodDisruptionBudget) with server-side apply, and finally turn the
// steps' results into status conditions in one place (status.go). Children are built by
// pure functions (configmap.go, deployment.go, service.go, pdb.go) that tests call
// without a cluster.
package controllers
