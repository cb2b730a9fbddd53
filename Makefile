# schemagate — build, generate, test. Targets follow kubebuilder's layout.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= schemagate/manager:dev
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
KUBECTL := $(BIN)/k8s/kubectl
# Test timeout for the whole go test run (unit + envtest).
TEST_TIMEOUT ?= 20m
# How many tests that call t.Parallel run at once (go test -parallel; its default is the number
# of CPUs). The envtest stories and the e2e kwok stories mostly wait on controllers, not CPU.
TEST_PARALLEL ?= 6
# How long `make fuzz` runs each fuzz target.
FUZZTIME ?= 5m
# `make test RUN=<regex>`, `make test-e2e RUN=<regex>`: only the tests whose names match (go test
# -run syntax, e.g. 'TestInstall' or 'TestStories'), in the same environment, with the same
# flags and prerequisites as the full run. The fuzzer's smoke run is left out when RUN is set.
RUN ?=
GO_TEST_RUN = $(if $(RUN),-run '$(RUN)')
# The packages `make test` runs under the race detector (-race): the planner, the controllers, the
# measurement providers, the spoke credentials and the kubectl plugin (the dashboard's broker and
# streams). Every other package runs without it (docs/testing.md: its cost).
MODULE := github.com/schemagate/schemagate
RACE_PKGS := $(MODULE)/pkg/rollout $(MODULE)/pkg/measure $(MODULE)/controllers $(MODULE)/pkg/spoke $(MODULE)/cmd/kubectl-schemagate

.PHONY: all
all: build

##@ Development

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	go -C hack/tools build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests from the API and controller markers.
	$(CONTROLLER_GEN) rbac:roleName=schemagate-manager crd:generateEmbeddedObjectMeta=true paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./hack/crdtrim config/crd/bases/routing.schemagate.io_routingservices.yaml

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

$(GOLANGCI_LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum hack/tools/lint/main.go hack/tools/build-lint.sh
	hack/tools/build-lint.sh

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml: errcheck, govet, staticcheck; kube-api-linter over api/).
	$(GOLANGCI_LINT) run ./...

.PHONY: vulncheck
vulncheck: ## govulncheck over ./... with the vulnerability database built from golang.org/x/vulndb (no network but the module proxy); fails on a called vulnerability hack/vulncheck/accepted.txt does not accept.
	@set -e; paths=$$(hack/tools/build-vulncheck.sh); bin=$$(echo "$$paths" | sed -n 1p); db=$$(echo "$$paths" | sed -n 2p); \
	$$bin -db "file://$$db" -format json ./... > $(BIN)/vulncheck.json; \
	go run ./hack/vulncheck -accepted hack/vulncheck/accepted.txt < $(BIN)/vulncheck.json

# The files `make verify` regenerates and then requires to be committed as generated.
GENERATED := config api charts/schemagate/crds dist/install.yaml

.PHONY: verify
verify: manifests generate chart-crds installer lint vulncheck ## Fail when generated files are stale, Go files are unformatted, the linter finds anything or the code calls a vulnerability nobody accepted.
	@hack/check-file-sizes.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- $(GENERATED) || { echo "generated files are stale: run 'make manifests generate chart-crds installer' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || { echo "untracked generated files:"; git status --porcelain -- $(GENERATED); exit 1; }

.PHONY: envtest-assets
envtest-assets: ## Build etcd, kube-apiserver and kubectl from source (cached under bin/k8s).
	hack/build-binaries.sh etcd kube-apiserver kubectl

.PHONY: test-compat
test-compat: manifests envtest-assets ## The envtest suite against the oldest supported Kubernetes (kube-apiserver 1.35.4 built from source into bin/k8s-oldest; cold ~8-13 min, suite ~11 min); RUN=<regex> picks stories.
	K8S_SET=oldest hack/build-binaries.sh kube-apiserver
	ln -sf ../k8s/etcd $(BIN)/k8s-oldest/etcd
	ln -sf ../k8s/kubectl $(BIN)/k8s-oldest/kubectl
	KUBEBUILDER_ASSETS=$(BIN)/k8s-oldest go test -timeout $(TEST_TIMEOUT) $(GO_TEST_RUN) -count=1 ./test/integration/

.PHONY: postgres
postgres: ## Install PostgreSQL (Debian's postgresql package) when missing; tests start their own servers.
	@hack/install-postgres.sh >/dev/null

.PHONY: test
test: manifests generate vet envtest-assets postgres ## Unit tests (the planner, controllers, measurement providers, spoke credentials and kubectl plugin under -race) and the envtest suite against a real kube-apiserver + etcd; RUN=<regex> runs a part.
	KUBEBUILDER_ASSETS=$(BIN)/k8s go test -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) $(GO_TEST_RUN) -count=1 $$(go list ./... | grep -vxF $(foreach p,$(RACE_PKGS),-e $(p)))
	KUBEBUILDER_ASSETS=$(BIN)/k8s go test -race -timeout $(TEST_TIMEOUT) $(GO_TEST_RUN) -count=1 $(RACE_PKGS)
	$(if $(RUN),,go test ./pkg/rollout/ -run '^$$' -fuzz '^FuzzCompute$$' -fuzztime 10s -fuzzminimizetime 5s)

.PHONY: cluster-binaries
cluster-binaries: ## Build the local cluster's binaries from source (cached under bin/k8s).
	hack/build-binaries.sh etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok

.PHONY: helm-binary
helm-binary: ## Build the helm CLI TestRelease runs from source (cached under bin/k8s).
	hack/build-binaries.sh helm

.PHONY: flux-binaries
flux-binaries: ## Build Flux's source-controller and kustomize-controller, which the GitOps stories run, from source (cached under bin/k8s, with their CRDs).
	hack/build-binaries.sh source-controller kustomize-controller

.PHONY: prometheus-binary
prometheus-binary: ## Build the Prometheus server test/prometheus runs and the promtool test/alerts runs from source (cached under bin/k8s).
	hack/build-binaries.sh prometheus promtool

# The demo is built and exec'd, not `go run`: `go run` passes no signal on, and the demo would
# outlive a make killed by PID. exec'd, it is make's own child, which dies with its parent
# (hack/demo/parent.go) and stops the cluster on SIGTERM as on Ctrl-C.
.PHONY: demo
demo: build cluster-binaries postgres ## Watch a schema-gated three-region rollout on a local control plane (KEEP=1 keeps it up; DEMO=expand-contract: the expand, roll out, contract lifecycle).
	go build -o $(BIN)/edge-router ./examples/edge-router
	go build -o $(BIN)/schemagate-schema ./cmd/schemagate-schema
	go build -o $(BIN)/demo ./hack/demo
	exec $(BIN)/demo --router=$(BIN)/edge-router

.PHONY: chromium
chromium: ## Install Chromium (Debian's chromium package) when missing: the dashboard's browser tests drive it headless.
	@hack/install-chromium.sh >/dev/null

.PHONY: test-e2e
test-e2e: build cluster-binaries prometheus-binary helm-binary flux-binaries postgres chromium plugin ## End-to-end tests on the local cluster (real ReplicaSet, Job and scheduler controllers), the incidents replayed with real routers, PostgreSQL and traffic, a hub with three region clusters, Flux syncing RoutingServices from a Git repository, and two releases installed, upgraded and removed; RUN=<regex> runs a part.
	go build -o $(BIN)/edge-router ./examples/edge-router
	go build -o $(BIN)/schemagate-schema ./cmd/schemagate-schema
	SCHEMAGATE_BIN=$(BIN) SCHEMAGATE_REQUIRE_PROMETHEUS=1 go test -tags e2e -timeout 50m -p 1 -parallel $(TEST_PARALLEL) $(GO_TEST_RUN) ./test/prometheus/ ./test/alerts/ ./cmd/kubectl-schemagate/ ./test/nodeagent/ ./test/e2e/ ./test/multicluster/ -count=1 -v

.PHONY: fuzz
fuzz: ## Fuzz the planner and the parsers longer: FUZZTIME=5m by default
	@for pkg in $$(go list ./pkg/...); do \
		list=$$(go test -list '^Fuzz' $$pkg) || exit 1; \
		for fn in $$(echo "$$list" | grep '^Fuzz' || true); do \
			echo "go test $$pkg -fuzz $$fn -fuzztime $(FUZZTIME)"; \
			go test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

.PHONY: bench
bench: postgres ## Benchmarks of the rollout planner, and of one migration probe's steps on a real PostgreSQL (prints a table).
	go test -run '^$$' -bench . -benchmem ./pkg/...
	go test -run '^$$' -bench BenchmarkProbe -benchtime 5x ./cmd/schemagate-schema/

.PHONY: bench-e2e
bench-e2e: build cluster-binaries ## Deployments vs RoutingServices at scale on the local cluster (BENCH_N=25,50 by default; BENCH_FLEET_N for the hub-and-regions fleet, default the smallest N); table in .state/bench/latest.md.
	SCHEMAGATE_BIN=$(BIN) go test -tags bench -timeout 150m -run 'TestBench|TestMemoryUnrelatedObjects' -v -count=1 ./test/bench/

##@ Build

.PHONY: build
build: ## Build the manager binary.
	go build -o $(BIN)/manager ./cmd/manager
	go build -o $(BIN)/schemagate-schema ./cmd/schemagate-schema

.PHONY: plugin
plugin: ## Build the kubectl plugin bin/kubectl-schemagate (put bin/ on PATH for `kubectl schemagate`).
	go build -o $(BIN)/kubectl-schemagate ./cmd/kubectl-schemagate

# The kubeconfig `make demo` writes (hack/demo's -state folder); KEEP=1 keeps its cluster up.
DEMO_KUBECONFIG ?= $(CURDIR)/.state/demo/kubeconfig

.PHONY: dashboard
dashboard: plugin ## Serve `kubectl schemagate dashboard` for the cluster of `KEEP=1 make demo` (ARGS='-n default --port 8001 --read-only' replaces the default -A).
	@test -f $(DEMO_KUBECONFIG) || { echo "no $(DEMO_KUBECONFIG): start the demo first with KEEP=1 make demo"; exit 1; }
	exec $(BIN)/kubectl-schemagate dashboard --kubeconfig $(DEMO_KUBECONFIG) $(or $(ARGS),-A)

.PHONY: run
run: manifests generate ## Run the manager against the cluster of the current kubeconfig.
	go run ./cmd/manager

.PHONY: docker-build
docker-build: ## Build the image with a Docker engine (`make image` needs none; docs/image.md).
	docker build -t $(IMG) .

# `make image`: where it writes and which linux GOARCHes it builds (docs/image.md).
IMAGE_DIR ?= dist/image
IMAGE_ARCHES ?= amd64,arm64

.PHONY: image
image: ## Build the manager image without a container engine: OCI layout of linux/amd64+arm64 and a docker-load tarball in dist/image.
	go run ./hack/image --out $(IMAGE_DIR) --tag $(IMG) --arches $(IMAGE_ARCHES)

# `make release VERSION=vX.Y.Z`: the release folder (docs/install.md); IMAGE_REPO is where its
# image is to be published.
VERSION ?=
IMAGE_REPO ?= ghcr.io/schemagate/manager
DOWNLOAD_BASE ?= https://github.com/schemagate/schemagate/releases/download/$(VERSION)/

.PHONY: release
release: ## Write release VERSION=vX.Y.Z into dist/release/VERSION/: image archive, crds.yaml, install.yaml, chart and index.yaml, plugin archives, krew manifest, notes, checksums (signed with SIGN_KEY=key.pem when set).
	@if [ -z "$(VERSION)" ]; then echo "make release: set VERSION, e.g. make release VERSION=v0.1.0" >&2; exit 1; fi
	go run ./hack/release --version $(VERSION) --image-repo $(IMAGE_REPO) --download-base $(DOWNLOAD_BASE) --arches $(IMAGE_ARCHES) $(if $(SIGN_KEY),--sign-key $(SIGN_KEY))

.PHONY: release-check
release-check: ## Build release v0.1.0 twice from this checkout and fail unless the two folders are byte-identical.
	go test -tags release -count=1 -timeout 30m -v ./test/release/

##@ Deployment

# deploy, undeploy, install and uninstall apply the committed files under config/ as they are;
# `make manifests` regenerates them from the markers.
.PHONY: install
install: ## Install the CRD into the cluster of the current kubeconfig.
	kubectl apply --server-side -k config/crd

# Deleting the CRD deletes every RoutingService in the cluster, and the garbage collector then
# deletes their ReplicaSets, Jobs and pods: so only with CONFIRM=yes.
.PHONY: uninstall
uninstall: ## Remove the CRD, and with it EVERY RoutingService and its pods (needs CONFIRM=yes).
	@echo "WARNING: make uninstall deletes the CRD routingservices.routing.schemagate.io, and with it every" >&2
	@echo "WARNING: RoutingService in every namespace; the garbage collector then deletes their ReplicaSets," >&2
	@echo "WARNING: migration Jobs and every routing pod. To remove only the manager: make undeploy." >&2
	@if [ "$(CONFIRM)" != "yes" ]; then echo "make uninstall: nothing deleted; run 'make uninstall CONFIRM=yes' to delete them." >&2; exit 1; fi
	kubectl delete -k config/crd

.PHONY: deploy
deploy: ## Deploy CRD, RBAC and the manager with image IMG (server-side apply; the config files are not edited).
	go run ./hack/render-installer --img $(IMG) | kubectl apply --server-side -f -

.PHONY: chart-crds
chart-crds: manifests ## Copy the generated CRD into the Helm chart (charts/schemagate/crds).
	rm -f charts/schemagate/crds/*.yaml
	cp config/crd/bases/*.yaml charts/schemagate/crds/

# The committed dist/install.yaml names the default image, so that rendering it never depends on
# who ran it; `make build-installer IMG=…` writes the installer for your image to INSTALLER, which
# git ignores (dist/local/), so the checkout stays clean.
DEFAULT_IMG := schemagate/manager:dev
INSTALLER ?= dist/local/install.yaml

.PHONY: installer
installer: manifests chart-crds ## Refresh the committed dist/install.yaml (default image schemagate/manager:dev); make verify runs it.
	go run ./hack/render-installer --img $(DEFAULT_IMG) -o dist/install.yaml

.PHONY: build-installer
build-installer: manifests chart-crds ## Render the installer (config/default, kustomize) with the manager image IMG into dist/local/install.yaml (git-ignored).
	@mkdir -p $(dir $(INSTALLER))
	go run ./hack/render-installer --img $(IMG) -o $(INSTALLER)
	@echo "wrote $(INSTALLER) for image $(IMG): kubectl apply --server-side -f $(INSTALLER)"

.PHONY: helm-lint
helm-lint: ## Lint and render the Helm chart with the Helm v4 library (test/install).
	go test -count=1 -timeout 120s ./test/install/ -run 'TestChart'

# Only the objects labelled app.kubernetes.io/name=schemagate (config/default): the Deployment,
# ServiceAccount, RBAC and metrics Service. Never the CRD (its RoutingServices would go with it)
# nor the namespace.
.PHONY: undeploy
undeploy: ## Remove the manager (Deployment, RBAC, ServiceAccount, metrics Service); the CRD, the RoutingServices and the namespace stay.
	go run ./hack/render-installer | kubectl delete --ignore-not-found -l app.kubernetes.io/name=schemagate -f -

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
