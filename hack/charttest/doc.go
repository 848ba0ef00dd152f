// Package charttest tests how kafka-mirror-operator is installed and operated, with the real
// tools users run: the Helm chart (helm lint and helm template through the helm binary named
// by $HELM, values.schema.json), the chart's and config/default's manifests applied with
// server-side dry-run to a real API server (envtest, $KUBEBUILDER_ASSETS), the chart's RBAC
// checked with SubjectAccessReviews against every rule the controller declares, the chart's
// generated CRD and RBAC compared with config/, the Argo CD health check (config/argocd/health.lua)
// run with gopher-lua against status fixtures, and the Dockerfile's key properties.
//
// It holds only tests; `make test` provides $HELM and $KUBEBUILDER_ASSETS, and a test that
// lacks either fails with a message saying how to get it.
package charttest
