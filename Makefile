# context-fold. `make test` is the test command the README and CI run.
GO ?= go
BIN := bin/contextfold
# The build id the engine reports in its hello and `contextfold version`.
BUILD_ID := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/contextfold/contextfold/internal/core/version.build=$(BUILD_ID)

.PHONY: all build test check cross gotest tstest dist pack release fuzz bench bench-adapter clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/contextfold

# Node ≥ 22.19, Pi 1.6.0 and TypeScript live in the project-local .cache/;
# .ci/setup-pi.sh installs them once and prints their paths.
PI_ENV = eval "$$(.ci/setup-pi.sh)"

# Claude Code, Codex and opencode (e2e/clients_test.go) live in .cache/clients/;
# .ci/setup-clients.sh installs them once (with PI_ENV's Node) and prints their paths.
CLIENTS_ENV = eval "$$(.ci/setup-clients.sh)"

# Everything CI checks: Go (unit, fuzz seeds, golden, keyless end-to-end
# against real Pi, the packed npm tarballs installed without Go), then the
# TypeScript adapter (types and node tests).
test: check cross build dist gotest tstest

check:
	@out="$$(gofmt -l cmd internal e2e 2>/dev/null)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The Windows and macOS engines are built and vetted here; they run untested.
cross:
	GOOS=windows GOARCH=amd64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/contextfold
	CGO_ENABLED=0 GOOS=darwin GOARCH=amd64 $(GO) build -o /dev/null ./cmd/contextfold

gotest: build dist
	@$(PI_ENV); $(CLIENTS_ENV); CONTEXTFOLD_E2E=1 CONTEXTFOLD_BIN="$(CURDIR)/$(BIN)" CONTEXTFOLD_DIST="$(CURDIR)/dist" $(GO) test -race -count=1 -timeout 60m ./...

# dist/: one npm tarball per platform engine and the Pi package, with
# SHA256SUMS (.ci/dist.sh). `make release` publishes them: a dry run unless
# PUBLISH=1, which needs npm credentials (RELEASING.md).
dist:
	@$(PI_ENV); GO="$(GO)" NODE="$$CONTEXTFOLD_NODE" .ci/dist.sh

# pack: dist/ for this machine alone (its engine and the Pi package), with
# Go and the node and npm on PATH: no .cache/ download (README, Install).
pack:
	@GO="$(GO)" PLATFORMS=host .ci/dist.sh

release: dist
	@$(PI_ENV); PUBLISH="$(PUBLISH)" NODE="$$CONTEXTFOLD_NODE" .ci/release.sh

tstest: build
	@$(PI_ENV); "$$CONTEXTFOLD_NODE" "$$CONTEXTFOLD_TSC" -p tsconfig.json && \
	  CONTEXTFOLD_BIN="$(CURDIR)/$(BIN)" "$$CONTEXTFOLD_NODE" --test extension/test/*.test.ts

# Short fuzzing pass over every fuzz target (FUZZTIME=30s for longer).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s $$pkg || exit 1; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

bench-adapter: build
	@$(PI_ENV); CONTEXTFOLD_BIN="$(CURDIR)/$(BIN)" "$$CONTEXTFOLD_NODE" extension/bench/adapter.bench.ts

clean:
	rm -rf bin dist
