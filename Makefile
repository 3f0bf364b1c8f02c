# context-fold. `make test` is the test command the README and CI run.
GO ?= go
BIN := bin/contextfold

.PHONY: all build test check gotest fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/contextfold

# Everything CI checks.
test: check gotest

check:
	@out="$$(gofmt -l cmd internal)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

gotest:
	$(GO) test -race -count=1 ./...

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

clean:
	rm -rf bin
