# Switchboard — the Kubernetes operator for MCP servers.
# `make help` lists the targets. Tools are pinned and installed into ./bin with `go install`.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

LOCALBIN := $(CURDIR)/bin
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM_VERSION := v3.22.0
HELM := $(LOCALBIN)/helm-$(HELM_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/switchboard-mcp/switchboard/internal/version.Version=$(VERSION)
GO_TEST_FLAGS ?= -count=1 -timeout=20m

# The test control plane (etcd, kube-apiserver, kube-controller-manager, kwok, ...) built from
# Go modules by hack/k8s-test-bins.sh into a versioned cache folder outside the work tree.

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-20s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/, and copy the CRDs into the Helm chart.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=switchboard-manager paths="./controllers/..." paths="./internal/webhook/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths="./internal/webhook/..." output:webhook:artifacts:config=config/webhook
	rm -rf charts/switchboard/crds && mkdir -p charts/switchboard/crds
	cp config/crd/bases/*.yaml charts/switchboard/crds/
	cp config/rbac/role.yaml charts/switchboard/files/role.yaml

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet (both test tiers).
	go vet $(E2E_TAGS),node ./... # and the real-node tests (test/node)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (config: .golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: test-control-plane
test-control-plane: ## Build the test control plane binaries (about 10 min cold, 0 s warm).
	hack/k8s-test-bins.sh

# Test tiers. The unit tier needs no control plane and starts no process. A test file that needs
# either (the API server, a built binary, `go install`, npm) begins with `//go:build e2e`; the
# packages listed here are not split by file yet, so all their tests are in the e2e tier.
E2E_ONLY_PACKAGES := ./sidecar/authn ./sidecar/stdio
E2E_TAGS := -tags e2e

.PHONY: test
test: $(HELM) manifests generate ## Run every test, both tiers, against a real API server (builds the control plane if missing).
	@assets="$$(hack/k8s-test-bins.sh | tail -n 1)"; \
	echo "KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS="$$assets" HELM="$(HELM)" go test $(E2E_TAGS) $(GO_TEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## Run the unit tier: no control plane, no processes (seconds).
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -vxF "$$(go list $(E2E_ONLY_PACKAGES))")

.PHONY: test-e2e
test-e2e: $(HELM) manifests generate ## Run the e2e tier (control plane, processes, npm) against a real API server.
	@assets="$$(hack/k8s-test-bins.sh | tail -n 1)"; \
	echo "KUBEBUILDER_ASSETS=$$assets"; \
	files="$$(grep -rlx --include='*_test.go' '//go:build e2e' . ; find $(E2E_ONLY_PACKAGES) -maxdepth 1 -name '*_test.go')"; \
	tests="$$(sed -n 's/^func \(\(Test\|Fuzz\|Example\)[A-Za-z0-9_]*\)(.*/\1/p' $$files | grep -vx TestMain | sort -u | paste -sd'|')"; \
	KUBEBUILDER_ASSETS="$$assets" HELM="$(HELM)" go test $(E2E_TAGS) $(GO_TEST_FLAGS) -run "^($$tests)$$" $$(dirname $$files | sort -u)

.PHONY: test-node
test-node: build $(HELM) ## Real pods: a kubelet + containerd node on this machine (root; builds cached), test/node on it, then teardown and a clean-host check (docs/real-node.md).
	HELM="$(HELM)" hack/node/test.sh

# NODE=real: the same loop on real pods (the test node of make test-node; root, docs/real-node.md).
NODE ?= kwok

.PHONY: dev
dev: build $(if $(filter real,$(NODE)),$(HELM)) ## The main job on this machine: control plane, manager, samples, sample server and sidecar (Ctrl-C stops all); NODE=real runs them on real pods.
ifeq ($(NODE),real)
	HELM="$(HELM)" exec hack/node/dev.sh
else
	go build -o $(LOCALBIN)/dev ./hack/dev
	@assets="$$(hack/k8s-test-bins.sh | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" exec $(LOCALBIN)/dev --bin=$(LOCALBIN) $(DEV_FLAGS)
endif

.PHONY: chart-lint
chart-lint: $(HELM) ## Lint the Helm chart.
	$(HELM) lint --strict charts/switchboard

.PHONY: test-race
test-race: ## Run the sidecar's and the client package's tests with the race detector (the sidecar under test is built with -race too).
	SIDECAR_TEST_RACE=1 go test -race $(E2E_TAGS) $(GO_TEST_FLAGS) ./sidecar/... ./cmd/sidecar/... ./client/...

.PHONY: conformance
conformance: ## Run the official MCP conformance suite (2026-07-28) through the sidecar, and directly for comparison.
	hack/conformance.sh

FUZZTIME ?= 2m
.PHONY: fuzz
fuzz: ## Fuzz the sidecar's request parser/validator, its parser differential, SSE reader bearer-token verification and audit argument redaction, and the client's SSE reader, FUZZTIME each.
	go test ./sidecar -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME)
	go test ./sidecar -run '^$$' -fuzz '^FuzzParserDifferential$$' -fuzztime $(FUZZTIME)
	go test ./sidecar/wire -run '^$$' -fuzz '^FuzzSSEReader$$' -fuzztime $(FUZZTIME)
	go test ./sidecar/authn -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME)
	go test ./client -run '^$$' -fuzz '^FuzzClientSSEReader$$' -fuzztime $(FUZZTIME)
	go test ./sidecar/audit -run '^$$' -fuzz '^FuzzArguments$$' -fuzztime $(FUZZTIME)

.PHONY: bench
bench: build ## Benchmark the sidecar against bare Go baselines (docs/performance.md); bounded, 127.0.0.1 only.
	mkdir -p results
	go build -o $(LOCALBIN)/sidecarbench ./hack/sidecarbench
	go build -o $(LOCALBIN)/sidecarbench-baselines ./hack/sidecarbench/baselines
	go build -o $(LOCALBIN)/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
	$(LOCALBIN)/sidecarbench -sidecar $(LOCALBIN)/sidecar -baselines $(LOCALBIN)/sidecarbench-baselines \
		-everything-server $(LOCALBIN)/everything-server -json results/sidecarbench.jsonl

.PHONY: audit-agent-check
audit-agent-check: ## Ship the audit trail through a real log agent (an OpenTelemetry Collector built from hack/logagent; minutes to build) and check what arrives (docs/audit.md).
	hack/logagent/check.sh

.PHONY: bench-drain
bench-drain: build ## Benchmark the graceful drain with 10,000 listen streams (docs/drain.md); 127.0.0.1 only.
	mkdir -p results
	go build -o $(LOCALBIN)/drainbench ./hack/drainbench
	$(LOCALBIN)/drainbench -sidecar $(LOCALBIN)/sidecar -json results/drainbench.jsonl

.PHONY: bench-scale
bench-scale: build ## Fleet benchmark: 1,000 MCPServers on the local control plane (docs/performance.md); long; 127.0.0.1 only. SCALE_FLAGS='-servers 50' for a quick run.
	mkdir -p results
	go build -o $(LOCALBIN)/scalebench ./hack/scalebench
	@assets="$$(hack/k8s-test-bins.sh | tail -n 1)"; \
	KUBEBUILDER_ASSETS="$$assets" $(LOCALBIN)/scalebench -manager $(LOCALBIN)/manager -json results/scalebench.jsonl $(SCALE_FLAGS)

.PHONY: verify
verify: generate manifests fmt check-large-files ## Regenerate everything and fail if the tree changed.
	go mod tidy
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "The tree is not clean after 'make generate manifests fmt' and 'go mod tidy':"; \
		git status --porcelain; git --no-pager diff | head -n 100; exit 1; fi

.PHONY: check-large-files
check-large-files: ## Fail on any tracked file over 1 MiB not listed in hack/large-files-allowed.txt.
	hack/check-large-files.sh

##@ Build

.PHONY: build
build: ## Build bin/manager and bin/sidecar (every command under cmd/).
	mkdir -p $(LOCALBIN)
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/ ./cmd/...

##@ Tools

$(CONTROLLER_GEN):
	mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(HELM):
	mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/helm $@

$(GOLANGCI_LINT):
	mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@
