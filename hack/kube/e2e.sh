#!/usr/bin/env bash
# make e2e-kube: test/kube on the node that make kube-up started. Imports the image make
# image just built (IMG), builds the test binary and runs it inside the node's network
# namespace, where its kfake clusters listen on the node's address and kubectl and helm
# reach the API server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kube/env.sh
. "$here/env.sh"
: "${IMG:?IMG names the image make image built}" "${HELM:?HELM is the helm binary}"
if [ ! -e "/run/netns/$KUBE_NETNS" ]; then kube_log "the node is not up: run 'make kube-up' first"; exit 1; fi
kube_dir=$(bash "$here/build.sh")
start=$SECONDS
ctr --address "$KUBE_CONTAINERD_SOCK" -n k8s.io images import "$kube_root/bin/image/kafka-mirror.tar" >/dev/null
kube_log "imported $IMG"
(cd "$kube_root" && go test -c -tags kube -o bin/kube.test ./test/kube/)
kube_log "test binary built ($((SECONDS - start))s); running it in network namespace $KUBE_NETNS"
cd "$kube_root"
kube_in_ns env KUBECTL="$kube_dir/kubectl" HELM="$HELM" REPO_ROOT="$kube_root" KUBE_NODE_IP="$KUBE_NODE_IP" \
  KAFKA_MIRROR_IMAGE="$IMG" KUBECONFIG="$KUBE_ADMIN_KUBECONFIG" HOME="${HOME:-/root}" \
  bin/kube.test -test.v -test.count=1 -test.timeout "${E2E_KUBE_TIMEOUT:-45m}" ${E2E_KUBE_RUN:+-test.run "$E2E_KUBE_RUN"} 2>&1 |
  grep -vE '^=== (RUN|PAUSE|CONT)'
kube_log "e2e-kube done in $((SECONDS - start))s"
