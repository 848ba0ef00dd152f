# syntax=docker/dockerfile:1
# One image for both the operator (`kafka-mirror manager`) and the mirror engine pods it
# creates (`kafka-mirror run`): the same static binary, on a distroless base, as non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) -t kafka-mirror .

ARG GO_VERSION=1.26

# The builder runs on the build host's platform and cross-compiles, so multi-arch builds
# (docker buildx --platform linux/amd64,linux/arm64) do not run the Go toolchain under emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src

# Modules first, in their own layer, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY . .
# CGO off: the binary must run on distroless/static, which has no libc.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.version=${VERSION} -X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.commit=${COMMIT}" \
      -o /out/kafka-mirror .

# distroless/static:nonroot has CA certificates and tzdata, no shell, and defaults to the
# nonroot user (65532); USER repeats it numerically so runAsNonRoot can verify it.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="kafka-mirror" \
      org.opencontainers.image.description="Mirror Kafka topics between clusters without losing data: operator and engine" \
      org.opencontainers.image.source="https://github.com/kafka-mirror/kafka-mirror-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=builder /out/kafka-mirror /usr/local/bin/kafka-mirror
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kafka-mirror"]
