#!/usr/bin/env bash
# make image-run: runs the image that make image built under runc, configured as the
# chart's securityContext configures the pod (UID/GID 65532, read-only root, no
# capabilities, no new privileges, a seccomp filter), on the host's network:
#   1. hack/image/cmd/kafka-mirror-runc's live tests: `kafka-mirror version`, then
#      `kafka-mirror run` against two kfake clusters with a counted workload, the
#      securityContext read back from /proc, SIGTERM, exit code 0, 0 lost, 0 duplicated;
#      then `kafka-mirror manager` with the chart's arguments against envtest's API server:
#      ready, a KafkaMirror reconciled, SIGTERM, exit 0 within the grace period, Lease released;
#   2. test/e2e's SIGTERM suite (E2E_RUN, default ^TestSIGTERM$) with every engine
#      started in a container instead of as bin/kafka-mirror.
# Needs root and runc (apt-get install runc). Leaves no container behind.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/bin/image"
if [ "$(id -u)" != 0 ]; then echo "image-run: runc containers with the chart's UID need root" >&2; exit 1; fi
if ! command -v runc >/dev/null; then echo "image-run: runc is not installed (apt-get install runc)" >&2; exit 1; fi
[ -f "$out/oci/index.json" ] || { echo "image-run: no image at $out/oci: run make image" >&2; exit 1; }

export KAFKA_MIRROR_IMAGE="$out/oci" KAFKA_MIRROR_ROOTFS="$out/rootfs"
export KAFKA_MIRROR_RUNC_ROOT="/run/kafka-mirror-runc" KAFKA_MIRROR_RUNC_BUNDLES="$out/bundles"
# TestRuncManager runs the operator against envtest's API server (built once, cached).
KUBEBUILDER_ASSETS=$(bash "$root/hack/envtest.sh")
export KUBEBUILDER_ASSETS
cleanup() {
  for id in $(runc --root "$KAFKA_MIRROR_RUNC_ROOT" list -q 2>/dev/null); do
    echo "image-run: removing leftover container $id" >&2
    runc --root "$KAFKA_MIRROR_RUNC_ROOT" delete --force "$id" || true
  done
  rm -rf "$KAFKA_MIRROR_RUNC_BUNDLES"
}
trap cleanup EXIT

start=$SECONDS
(cd "$root/hack/image" && go run . unpack --layout "$KAFKA_MIRROR_IMAGE" --rootfs "$KAFKA_MIRROR_ROOTFS" &&
  go build -o "$out/kafka-mirror-runc" ./cmd/kafka-mirror-runc)
echo "=== runc $(runc --version | head -1 | cut -d' ' -f3), image $(cd "$root/hack/image" && go run . digest --layout "$KAFKA_MIRROR_IMAGE")"

echo "=== kafka-mirror version, run and manager, SIGTERM under runc ($((SECONDS - start))s)"
(cd "$root/hack/image" && KAFKA_MIRROR_RUNC_TEST=1 go test -count=1 -v -run 'TestRunc' ./cmd/kafka-mirror-runc/) |
  grep -vE '^=== (RUN|PAUSE|CONT)'

echo "=== test/e2e ${E2E_RUN:-^TestSIGTERM\$} with every engine in a runc container ($((SECONDS - start))s)"
(cd "$root" && KAFKA_MIRROR_BIN="$out/kafka-mirror-runc" go test -tags e2e -timeout 20m -count=1 -v \
  -run "${E2E_RUN:-^TestSIGTERM\$}" ./test/e2e/) 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'
echo "=== done ($((SECONDS - start))s)"
