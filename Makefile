# den: `make run` sets everything up and starts dend; `make test` runs every test.
SHELL := /bin/bash
export CGO_ENABLED := 0
export PATH := /usr/local/go/bin:$(PATH)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/den-dev/den/internal/version.Version=$(VERSION)
GO_TEST_FLAGS ?=
DEND_FLAGS ?=

.PHONY: all setup build run test unit integration bench fuzz vet clean

all: build

setup:
	@RUNSC=$$(./scripts/setup.sh) && mkdir -p bin && ln -sf "$$RUNSC" bin/runsc

build: setup
	go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/dend ./cmd/den ./cmd/den-init

run: build
	bin/dend $(DEND_FLAGS)

# Every test: unit tests, then integration tests against real runsc, btrfs
# and namespaces (root).
test: build
	./scripts/test-setup.sh
	go vet ./...
	DEN_BIN=$(CURDIR)/bin go test -count=1 -timeout 25m $(GO_TEST_FLAGS) ./...

unit:
	go test -count=1 -short $$(go list ./... | grep -v /integration)

integration: build
	./scripts/test-setup.sh
	DEN_BIN=$(CURDIR)/bin go test -count=1 -timeout 25m -v ./integration/

bench: build
	go run ./bench -bin $(CURDIR)/bin

# Fuzz every parser of outside input for FUZZTIME each (their seed corpora
# also run as ordinary tests in `make test`).
FUZZTIME ?= 30s
fuzz:
	go test -run=NONE -fuzz='^FuzzClean$$' -fuzztime=$(FUZZTIME) ./internal/fspath/
	go test -run=NONE -fuzz='^FuzzRel$$' -fuzztime=$(FUZZTIME) ./internal/fspath/
	go test -run=NONE -fuzz='^FuzzExtract$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./internal/initd/
	go test -run=NONE -fuzz='^FuzzApplyLayer$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./internal/image/
	go test -run=NONE -fuzz='^FuzzParseToken$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzParseBearer$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzParseKey$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzPasswdHome$$' -fuzztime=$(FUZZTIME) ./internal/sshgate/
	go test -run=NONE -fuzz='^FuzzParseNetworkRule$$' -fuzztime=$(FUZZTIME) ./internal/sandbox/
	go test -run=NONE -fuzz='^FuzzDecodeSecrets$$' -fuzztime=$(FUZZTIME) ./internal/guest/
	go test -run=NONE -fuzz='^FuzzMasker$$' -fuzztime=$(FUZZTIME) ./internal/sandbox/
	go test -run=NONE -fuzz='^FuzzOpen$$' -fuzztime=$(FUZZTIME) ./internal/imagecrypt/

vet:
	go vet ./...

clean:
	rm -rf bin
