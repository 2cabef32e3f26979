# cutkv build, test and tooling. Every tool runs pinned through the Go
# module proxy, so a fresh machine with only Go needs nothing else.

GO ?= go
BIN := $(CURDIR)/bin
export GOFLAGS ?= -buildvcs=false

BUF_VERSION            := v1.75.0
PROTOC_GEN_GO_VERSION  := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.2
STATICCHECK_VERSION    := v0.8.2

MODULE := github.com/cutkv/cutkv

# What kvnode --version and kvctl version print. GOFLAGS above turns off
# Go's own VCS stamping (builds outside a checkout must work), so the
# commit is stamped here; outside a git checkout these are empty and the
# binaries fall back to their build information.
GIT_VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
GIT_MODIFIED ?= $(shell if [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then echo true; elif git rev-parse HEAD >/dev/null 2>&1; then echo false; fi)
LDFLAGS := -X $(MODULE)/internal/version.Version=$(GIT_VERSION) -X $(MODULE)/internal/version.Commit=$(GIT_COMMIT) -X $(MODULE)/internal/version.Modified=$(GIT_MODIFIED)

# Packages with goroutines and locks: their tests run with -race.
RACE_PKGS := ./wal/... ./engine/... ./discovery/... ./raftstore/... ./partition/... ./rpc/... ./node/... ./client/... ./server/... ./snapshot/... ./chaos/...

# make test's soak duration (tests read CUTKV_SOAK).
CUTKV_SOAK ?= 10s
export CUTKV_SOAK

# IMAGE: the tag make image builds.
IMAGE ?= cutkv:dev

.PHONY: all build etcd image e2e-compose run node-stop node-start run-secure chaos test test-unit verify fmt vet staticcheck tidy-check proto proto-check e2e bench clean bench-compare

all: build

# The benchmark tools (kvbench, benchplot and the scripts' helpers) are
# a module of their own, bench/, so that etcd's client and server are
# dependencies of the benchmarks only. So are deploy/'s checks of the
# Kubernetes manifests and the systemd unit (the Kubernetes API types).
BENCH_TOOLS := ./cmd/kvbench ./cmd/benchplot ./cmd/benchckpt ./cmd/benchsnap ./cmd/benchtrust ./cmd/benchrow

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...
	cd bench && $(GO) build -o $(BIN)/ $(BENCH_TOOLS)

# etcd's server at the version bench/go.mod requires (v3.7.x), built from
# the Go module proxy, for make bench-compare.
etcd:
	@mkdir -p $(BIN)
	cd bench && $(GO) build -o $(BIN)/etcd ./cmd/etcd

# The kvnode/kvctl image, FROM scratch (nothing pulled): deploy/image.
image:
	LDFLAGS='$(LDFLAGS)' ./deploy/image/build.sh $(IMAGE)

# The image and deploy/compose end to end (skips without a Docker engine).
e2e-compose:
	LDFLAGS='$(LDFLAGS)' ./scripts/e2e-compose.sh

# A 3-node local cluster in the foreground; Ctrl-C stops it. Data under ./data.
# A node that exits is reported and the others keep running; from another
# terminal, make node-stop N=2 and make node-start N=2 stop and start one
# (scripts/run-local.sh stop|start|status).
run: build
	@./scripts/run-local.sh

node-stop:
	@./scripts/run-local.sh stop $(if $(N),n$(N),$(error give the node: make node-stop N=1|2|3))

node-start:
	@./scripts/run-local.sh start $(if $(N),n$(N),$(error give the node: make node-start N=1|2|3))

# The same cluster with TLS everywhere (certificates made once under
# ./data-secure/certs); prints the kvctl flags to use.
run-secure: build
	@CUTKV_TLS=1 CUTKV_DATA=./data-secure ./scripts/run-local.sh

test: verify test-unit

test-unit: build
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v -E -e '/proto/' $(foreach p,$(RACE_PKGS),-e '^$(MODULE)/$(patsubst ./%/...,%,$(p))(/|$$)'))
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	CUTKV_PARTITION_STORE=pebble $(GO) test -count=1 -race ./partition/
	$(GO) test -count=1 -tags failpoints ./internal/failpoint/ ./internal/synclog/
	$(GO) test -count=1 -race -tags failpoints -run '^(TestCut|TestTxnRecovery|TestProbes)' ./server/
	cd bench && $(GO) test -count=1 -timeout 20m ./...
	cd deploy && $(GO) test -count=1 -timeout 5m ./...

verify: fmt vet staticcheck tidy-check proto-check

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd deploy && $(GO) vet ./...

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd bench && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd deploy && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

tidy-check:
	@for m in . bench deploy; do \
	  cp $$m/go.mod /tmp/cutkv.go.mod.bak; cp $$m/go.sum /tmp/cutkv.go.sum.bak; \
	  (cd $$m && $(GO) mod tidy) || exit 1; \
	  if ! git diff --quiet -- $$m/go.mod $$m/go.sum; then echo "go mod tidy changed $$m/go.mod or $$m/go.sum"; git diff -- $$m/go.mod $$m/go.sum | head -40; \
	    cp /tmp/cutkv.go.mod.bak $$m/go.mod; cp /tmp/cutkv.go.sum.bak $$m/go.sum; exit 1; fi; \
	done

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

# Regenerate the Go code from proto/*.proto (committed).
proto: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	$(BIN)/buf lint
	$(BIN)/buf generate

# Fails when the committed generated code differs from a fresh generation.
proto-check: proto
	@if ! git diff --quiet -- proto; then echo "generated protobuf code is stale: run make proto"; git diff --stat -- proto; exit 1; fi
	@if [ -n "$$(git ls-files --others --exclude-standard proto)" ]; then echo "untracked generated files in proto/:"; git ls-files --others --exclude-standard proto; exit 1; fi

# The fault harness (package chaos; needs root): clusters of 3 and 5
# kvnode processes, each in a network namespace of its own, under
# partitions, packet loss, kills and pauses, every history checked; it
# appends to docs/reliability/journal.jsonl and rewrites
# docs/reliability.md. CUTKV_SOAK (default here 5m) is its length, SEED
# its seed (default: from the commit), CUTKV_CHAOS_KINDS the fault kinds,
# RECOVERY the bound on recovery after the last fault (default 30s).
SEED ?=
RECOVERY ?=
chaos:
	CUTKV_CHAOS=1 SEED=$(SEED) CUTKV_SOAK=$(if $(filter command line environment,$(origin CUTKV_SOAK)),$(CUTKV_SOAK),5m) \
		$(GO) test -count=1 -v -timeout 0 -run '^TestChaos$$' ./chaos/ $(if $(RECOVERY),-args -chaos.recovery=$(RECOVERY))

# Long soaks (minutes), then a node holding 10 GiB (about 5 minutes here).
e2e: build
	CUTKV_SOAK=3m $(GO) test -count=1 -timeout 60m -tags failpoints -skip '^TestStateLargerThanMemory$$' ./...
	CUTKV_SOAK=30m CUTKV_LARGE_BYTES=10737418240 $(GO) test -count=1 -v -timeout 40m -run '^TestStateLargerThanMemory$$' ./tests/largestate/

clean:
	rm -rf $(BIN)

# cutkv side by side with etcd (installs Debian's etcd-server if etcd is
# missing): A B A B runs per workload, then what cutkv's own features cost
# (COSTS="ab cuts upload restart memory": cuts and snapshots under load,
# cut completion, bytes uploaded per incremental snapshot, restart time,
# memory per key), then replaces the section "Side by side with etcd" of
# docs/benchmarks.md and its charts in docs/img/. About 20 minutes; not
# part of test or CI. RUN=20s and WORKLOADS="put get txn" by default;
# the other knobs are in the script's header.
bench-compare:
	./scripts/bench-compare.sh
