#!/usr/bin/env bash
# kubectl against the node of make kube-up: runs the cached kubectl inside the node's
# network namespace with the admin kubeconfig. Usage: bash hack/kube/kubectl.sh get pods -A
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kube/env.sh
. "$here/env.sh"
kube_dir=$(bash "$here/build.sh")
exec nsenter --net="/run/netns/$KUBE_NETNS" -- "$kube_dir/kubectl" --kubeconfig "$KUBE_ADMIN_KUBECONFIG" "$@"
