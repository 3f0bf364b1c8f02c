# context-fold. `make test` is the test command the README and CI run.
GO ?= go
BIN := bin/contextfold

.PHONY: all build test check gotest tstest fuzz bench bench-adapter clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/contextfold

# Node ≥ 22.19, Pi 1.6.0 and TypeScript live in the project-local .cache/;
# .ci/setup-pi.sh installs them once and prints their paths.
PI_ENV = eval "$$(.ci/setup-pi.sh)"

# Everything CI checks: Go (unit, fuzz seeds, golden, keyless end-to-end
# against real Pi), then the TypeScript adapter (types and node tests).
test: check build gotest tstest

check:
	@out="$$(gofmt -l cmd internal e2e 2>/dev/null)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

gotest: build
	@$(PI_ENV); CONTEXTFOLD_E2E=1 CONTEXTFOLD_BIN="$(CURDIR)/$(BIN)" $(GO) test -race -count=1 -timeout 40m ./...

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
	rm -rf bin
