#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that envtest runs, from source through the Go
# module proxy (no prebuilt downloads are reachable here), and caches them outside the
# repository keyed by version, so that only the first run on a machine pays for the build
# (kube-apiserver takes about 12 minutes on 2 cores).
#
# Prints the directory holding the binaries: use it as KUBEBUILDER_ASSETS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/envtest/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$here/envtest/go.mod")
cache=${KAFKA_MIRROR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-mirror}
dir="$cache/envtest/k8s-${k8s_version}-etcd-${etcd_version}"

build() { # build <package> <output name>
  local pkg=$1 out=$2
  if [ -x "$dir/$out" ]; then return 0; fi
  echo "envtest: building $out from $pkg (first run on this machine; cached in $dir)" >&2
  local start=$SECONDS
  if ! (cd "$here/envtest" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/$out.tmp" "$pkg") >&2; then
    echo "envtest: building $out failed; check that the Go module proxy is reachable and retry 'bash hack/envtest.sh'" >&2
    exit 1
  fi
  mv "$dir/$out.tmp" "$dir/$out"
  echo "envtest: built $out in $((SECONDS - start))s" >&2
}

mkdir -p "$dir"
build go.etcd.io/etcd/server/v3 etcd
build k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
echo "$dir"
