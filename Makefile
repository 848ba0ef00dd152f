# kafka-mirror-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Tool versions (see ../shared/design.md); tools are built once and cached outside the repo.
CONTROLLER_GEN_VERSION ?= v0.23.0
HELM_VERSION ?= v3.22.0
CACHE ?= $(or $(KAFKA_MIRROR_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kafka-mirror)
export KAFKA_MIRROR_CACHE := $(CACHE)
TOOLS := $(CACHE)/bin
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
HELM := $(TOOLS)/helm-$(HELM_VERSION)
# promtool comes from the Prometheus module version hack/monitoring pins for its PromQL parser.
PROMETHEUS_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2; exit}' hack/monitoring/go.mod)
PROMTOOL := $(TOOLS)/promtool-$(PROMETHEUS_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The version variables live in mirror/cli, so a team's own image stamps the same ones.
LDFLAGS := -s -w -X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.version=$(VERSION) -X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.commit=$(COMMIT)
IMG ?= ghcr.io/kafka-mirror/kafka-mirror:$(VERSION)
# The image's timestamps: the last commit's time, so that rebuilding a commit gives the same digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
TEST_TIMEOUT ?= 30m

.DEFAULT_GOAL := help

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Use
.PHONY: demo
demo: ## Mirror between two embedded Kafka clusters and verify nothing was lost.
	go run . demo $(DEMO_ARGS)

.PHONY: build
build: ## Build bin/kafka-mirror.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/kafka-mirror .

##@ Test
.PHONY: test
test: build envtest helm promtool controller-gen ## Run every test: unit, kfake end-to-end, envtest controller, chart, dashboard, alerts, autoscaling with engine processes.
	KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)" HELM="$(HELM)" go test -timeout $(TEST_TIMEOUT) ./...
	# Autoscaling on lag with the operator on envtest and engines as processes (also in make e2e).
	KAFKA_MIRROR_BIN="$(CURDIR)/bin/kafka-mirror" KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)" go test -tags e2e -timeout $(TEST_TIMEOUT) -count=1 -run '^TestAutoscaleOnLag$$' ./test/e2e/
	cd hack/image && go test -timeout $(TEST_TIMEOUT) ./...
	cd hack/monitoring && KUBEBUILDER_ASSETS="$$(bash ../envtest.sh)" PROMTOOL="$(PROMTOOL)" CONTROLLER_GEN="$(CONTROLLER_GEN)" go test -timeout $(TEST_TIMEOUT) ./...

.PHONY: test-stress
test-stress: envtest helm ## Run the tests RUNS times (default 3) with every core busy; PKG=./mirror/ picks packages.
	KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)" HELM="$(HELM)" bash hack/test-stress.sh $(or $(RUNS),3) $(or $(PKG),./...)
	$(MAKE) fuzz

# The fuzz targets, as package:Target; each runs for FUZZTIME in make fuzz (and after make test-stress).
# controllers' FuzzValidate is left out: its package's TestMain starts envtest and kfake, and
# the fuzzing workers never finish gathering the baseline with it (make test runs its seeds).
FUZZ_TARGETS := ./mirror/config/:FuzzParse ./mirror/handler/:FuzzNewChain ./mirror/handler/:FuzzFastJSON
FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Run the engine's fuzz targets for FUZZTIME (default 30s each, about 90 s in all); a finding fails and is saved under testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

.PHONY: e2e
e2e: build envtest ## Run the fault-injection and loss-audit suite (test/e2e) against the built binary (and the operator on envtest).
	KAFKA_MIRROR_BIN="$(CURDIR)/bin/kafka-mirror" KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)" go test -tags e2e -timeout 20m -count=1 -v ./test/e2e/... 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

# The real-Kafka smoke subset: single-broker clusters, a few minutes (.ci/run runs it).
E2E_KAFKA_SMOKE := ^TestSmoke|^TestExactlyOnceFirstStartOnFreshTarget$$

.PHONY: e2e-kafka
e2e-kafka: build kafka ## Run the promises on real Apache Kafka (test/e2ekafka): 3-broker KRaft JVMs, leader kills, rolling restarts, transactions, SCRAM with ACLs.
	KAFKA_JARS="$$(bash hack/kafka.sh)" go test -tags kafka -timeout 30m -count=1 -v ./internal/realkafka/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'
	KAFKA_MIRROR_BIN="$(CURDIR)/bin/kafka-mirror" KAFKA_JARS="$$(bash hack/kafka.sh)" go test -tags kafka -timeout 90m -count=1 -v ./test/e2ekafka/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: e2e-kafka-smoke
e2e-kafka-smoke: build kafka ## Run the real-Kafka smoke subset (single brokers: kill -9 audited, exactly-once read_committed, SCRAM with ACLs).
	KAFKA_MIRROR_BIN="$(CURDIR)/bin/kafka-mirror" KAFKA_JARS="$$(bash hack/kafka.sh)" go test -tags kafka -timeout 20m -count=1 -v -run '$(E2E_KAFKA_SMOKE)' ./test/e2ekafka/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: bench
bench: $(if $(filter real,$(KAFKA)),kafka kafka-mm2) ## Measure throughput, latency and memory against the broker-bound limit (docs/benchmarks/); KAFKA=real: beside MirrorMaker 2 on Apache Kafka (docs/benchmarks/mm2.md).
	$(if $(filter real,$(KAFKA)),KAFKA_JARS="$$(bash hack/kafka.sh)" MM2_JARS="$$(bash hack/kafka-mm2.sh)") go run ./hack/bench $(if $(filter real,$(KAFKA)),--kafka real) $(if $(PROFILE),--profile) $(BENCH_ARGS)

.PHONY: bench-operator
bench-operator: envtest ## Measure the operator at fleet scale (envtest + kfake) into docs/benchmarks/operator.md; BENCH_OPERATOR_ARGS="--mirrors 1000".
	KUBEBUILDER_ASSETS="$$(bash hack/envtest.sh)" go run ./hack/benchoperator $(BENCH_OPERATOR_ARGS)

.PHONY: lint
lint: ## go vet and gofmt.
	go vet ./...
	cd hack/image && go vet ./...
	cd hack/monitoring && go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

##@ Image
.PHONY: image
image: build ## Build the OCI image without Docker: bin/image/oci (OCI layout), bin/image/kafka-mirror.tar.
	cd hack/image && go run . build --binary "$(CURDIR)/bin/kafka-mirror" --version "$(VERSION)" --commit "$(COMMIT)" \
	  --created "$(SOURCE_DATE_EPOCH)" --ref "$(IMG)" --out "$(CURDIR)/bin/image"

.PHONY: image-run
image-run: image ## Run the image under runc with the chart's securityContext: version, a counted mirror, SIGTERM drains (root).
	bash hack/image/run.sh

##@ Real node (root; not in make test or .ci/run: the first build of the node binaries takes about an hour)
.PHONY: kube-up
kube-up: image ## Start a single-node Kubernetes here (hack/kube): etcd, API server, kubelet, containerd, CNI; the image imported.
	bash hack/kube/up.sh

.PHONY: kube-down
kube-down: ## Stop the kube-up node; fails if any of its processes, mounts, interfaces or cgroups is left.
	bash hack/kube/down.sh

.PHONY: e2e-kube
e2e-kube: image helm ## On the kube-up node: helm install, a KafkaMirror mirrored and audited, scale, roll, force-delete, upgrade, apply -k.
	IMG="$(IMG)" HELM="$(HELM)" bash hack/kube/e2e.sh

##@ Generate
.PHONY: manifests
manifests: controller-gen ## Generate CRD, RBAC and deepcopy from api/ and controllers/ into config/ and the chart.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd rbac:roleName=kafka-mirror-manager paths=./api/... paths=./controllers/... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	bash hack/sync-chart.sh
	$(MAKE) monitoring

.PHONY: monitoring
monitoring: ## Generate the Grafana dashboard and PrometheusRule (config/monitoring, chart files/) from hack/monitoring.
	cd hack/monitoring && go run . -root ../..

.PHONY: dashboard-preview
dashboard-preview: ## Run a short mirror against in-process Kafka and plot its metrics into docs/images/dashboard-preview.png.
	cd hack/monitoring && go run . -root ../.. -preview

.PHONY: helm-lint
helm-lint: helm ## Lint the Helm chart.
	$(HELM) lint charts/kafka-mirror-operator

##@ Tools
.PHONY: envtest
envtest: ## Build (once, cached) the kube-apiserver and etcd that envtest runs.
	@bash hack/envtest.sh >/dev/null

.PHONY: kafka
kafka: ## Fetch (once, cached) the Apache Kafka jars the real-Kafka tests run, with Maven (hack/kafka/pom.xml).
	@bash hack/kafka.sh >/dev/null

.PHONY: kafka-mm2
kafka-mm2: ## Fetch (once, cached) the MirrorMaker 2 jars make bench KAFKA=real runs, with Maven (hack/kafka/mm2/pom.xml).
	@bash hack/kafka-mm2.sh >/dev/null

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/tmp-cg go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/tmp-cg/controller-gen $@ && rmdir $(TOOLS)/tmp-cg

.PHONY: helm
helm: $(HELM) ## Build (once, cached) the helm binary the chart tests use.
$(HELM):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/tmp-helm go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(TOOLS)/tmp-helm/helm $@ && rmdir $(TOOLS)/tmp-helm

.PHONY: promtool
promtool: $(PROMTOOL) ## Build (once, cached) the promtool that tests the alerts.
$(PROMTOOL):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/tmp-promtool go install github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)
	mv $(TOOLS)/tmp-promtool/promtool $@ && rmdir $(TOOLS)/tmp-promtool
