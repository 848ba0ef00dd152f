#!/usr/bin/env bash
# Builds the node binaries `make kube-up` runs next to envtest's kube-apiserver and etcd
# (kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl) from source
# through the Go module proxy, at the Kubernetes version hack/kube/go.mod pins (the same as
# hack/envtest), and caches them outside the repository keyed by that version, so that only
# the first run on a machine pays for the build (about 45-60 minutes on 2 cores cold).
#
# Prints the directory holding the binaries. Set KUBE_BUILD_NICE=19 to build at low priority.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
[ -n "$k8s_version" ] || k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}' "$here/go.mod")
cache=${KAFKA_MIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-mirror}
dir="$cache/kube/k8s-${k8s_version}"
binaries=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)

mkdir -p "$dir"
missing=()
for b in "${binaries[@]}"; do
  [ -x "$dir/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kube: building ${missing[*]} (k8s.io/kubernetes $k8s_version; first run on this machine; cached in $dir)" >&2
  start=$SECONDS
  pkgs=()
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  # One go build for all of them, so that the packages they share compile once.
  if ! (cd "$here" && nice -n "${KUBE_BUILD_NICE:-0}" env CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp/" "${pkgs[@]}") >&2; then
    rm -rf "$tmp"
    echo "kube: building ${missing[*]} failed; check that the Go module proxy is reachable and retry 'bash hack/kube/build.sh'" >&2
    exit 1
  fi
  for b in "${missing[@]}"; do mv "$tmp/$b" "$dir/$b"; done
  rmdir "$tmp"
  echo "kube: built ${missing[*]} in $((SECONDS - start))s" >&2
fi
echo "$dir"
