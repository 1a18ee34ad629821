# den: `make run` sets everything up and starts dend; `make test` runs every test.
SHELL := /bin/bash
export CGO_ENABLED := 0
export PATH := /usr/local/go/bin:$(PATH)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/den-dev/den/internal/version.Version=$(VERSION)
GO_TEST_FLAGS ?=
DEND_FLAGS ?=

.PHONY: all setup build binaries run test unit integration test-durations test-hostvm bench faults fuzz vet house clean install install-files dist dist-prev man

# Where `make install` puts things; DESTDIR stages them elsewhere.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib/den
SYSCONFDIR ?= /etc
UNITDIR ?= $(SYSCONFDIR)/systemd/system
COMPLETIONDIR ?= $(PREFIX)/share
MANDIR ?= $(PREFIX)/share/man
BIN ?= bin

all: build

setup:
	@RUNSC=$$(./scripts/setup.sh) && mkdir -p bin && ln -sf "$$RUNSC" bin/runsc

build: setup binaries

# den-init is every sandbox's PID 1, and its memory is saved with each
# hibernate, checkpoint and fork. gVisor backs a first touch of anonymous
# memory with the whole 2 MiB around it, and a save reads all of it, so
# den-init is built to touch fewer such regions: its heap at Go's fixed
# base (next to its data, sharing one region of the heap index) rather
# than a random one, and no memory profiling from the first allocation.
INIT_BUILD := GOEXPERIMENT=norandomizedheapbase64 go build -trimpath \
	-ldflags '$(LDFLAGS) -X runtime.godebugDefault=memprofilerate=0'

binaries:
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/dend ./cmd/den
	$(INIT_BUILD) -o $(BIN)/ ./cmd/den-init

run: build
	bin/dend $(DEND_FLAGS)

# Every test: unit tests, then integration tests against real runsc, btrfs
# and namespaces (root), as SHARDS test binaries at once (tools/shard:
# balanced by integration/durations.txt, with the tests of
# integration/shards.txt that must run alone after them). Serially they
# take about 45 minutes on a 2-core machine, most of it waiting on
# sandboxes; the timeout is each binary's, for a hang, not a budget.
# GO_TEST_FLAGS go to both (e.g. -run TestX, -v, -race); SHARD_FLAGS to
# tools/shard (-n prints the shards, -serial runs only the serial tests).
SHARDS ?= 2
SHARD_FLAGS ?=
SHARD_LOGS ?= $(CURDIR)/bin/test-shards
UNIT_PKGS = $$(go list ./... | grep -v '/integration$$')
test: build
	./scripts/test-setup.sh
	go vet ./...
	go run -C tools/house . -check -dir $(CURDIR)
	DEN_BIN=$(CURDIR)/bin go test -count=1 -timeout 80m $(GO_TEST_FLAGS) $(UNIT_PKGS)
	DEN_BIN=$(CURDIR)/bin go run -C tools/shard . -dir $(CURDIR) -shards $(SHARDS) \
		-timeout 80m -out $(SHARD_LOGS) $(SHARD_FLAGS) -- $(GO_TEST_FLAGS)
	go test -C tools/dist -count=1 ./...
	go test -C tools/shard -count=1 ./...

unit:
	go test -count=1 -short $(UNIT_PKGS)
	go test -C tools/dist -count=1 ./...
	go test -C tools/shard -count=1 ./...

integration: build
	./scripts/test-setup.sh
	DEN_BIN=$(CURDIR)/bin go run -C tools/shard . -dir $(CURDIR) -shards $(SHARDS) \
		-timeout 80m -out $(SHARD_LOGS) $(SHARD_FLAGS) -- $(GO_TEST_FLAGS)

# integration/durations.txt from the last run's shard logs (go test -v).
test-durations:
	go run -C tools/shard . -dir $(CURDIR) -refresh $(SHARD_LOGS)/shard-*.log

# den on the host most users run, systemd and cgroup v2 (this machine has
# cgroup v1 and no systemd): HOSTVM boots Debian 12 under qemu and runs
# scripts/hostvm-suite.sh there (install, systemctl start/restart/stop,
# limits, the quiet-sandbox watch, pause/hibernate/fork, removal, a power
# off). qemu emulates the CPU here, so it takes the better part of an hour.
# Run it before landing changes to host-facing code.
HOSTVM ?= ../shared/hostvm/run-in-vm
HOSTVM_TIMEOUT ?= 5400
test-hostvm: build
	HOSTVM_TIMEOUT=$(HOSTVM_TIMEOUT) $(HOSTVM) scripts/hostvm-suite.sh

bench: build
	go run ./bench -bin $(CURDIR)/bin

# The fault run (docs/testing.md: The fault run): random operations and faults,
# then checks; long and random, so not part of `make test`.
OPS ?= 200
SEED ?= 0
faults: build
	./scripts/test-setup.sh
	go run ./bench -bin $(CURDIR)/bin -only faults -ops $(OPS) -seed $(SEED)

# Fuzz every parser of outside input for FUZZTIME each (their seed corpora
# also run as ordinary tests in `make test`).
FUZZTIME ?= 30s
# house measures how the code is laid out (docs/architecture.md).
house:
	./scripts/house-measure.sh

fuzz:
	go test -run=NONE -fuzz='^FuzzClean$$' -fuzztime=$(FUZZTIME) ./internal/fspath/
	go test -run=NONE -fuzz='^FuzzRel$$' -fuzztime=$(FUZZTIME) ./internal/fspath/
	go test -run=NONE -fuzz='^FuzzExtract$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./internal/initd/files/
	go test -run=NONE -fuzz='^FuzzApplyLayer$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./internal/image/
	go test -run=NONE -fuzz='^FuzzParseToken$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzParseBearer$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzParseKey$$' -fuzztime=$(FUZZTIME) ./internal/auth/
	go test -run=NONE -fuzz='^FuzzPasswdHome$$' -fuzztime=$(FUZZTIME) ./internal/sshgate/
	go test -run=NONE -fuzz='^FuzzParseRule$$' -fuzztime=$(FUZZTIME) ./internal/netpolicy/
	go test -run=NONE -fuzz='^FuzzRealign$$' -fuzztime=$(FUZZTIME) ./internal/storage/btrfs/
	go test -run=NONE -fuzz='^FuzzDecodeSecrets$$' -fuzztime=$(FUZZTIME) ./internal/guest/
	go test -run=NONE -fuzz='^FuzzMasker$$' -fuzztime=$(FUZZTIME) ./internal/sandbox/
	go test -run=NONE -fuzz='^FuzzOpen$$' -fuzztime=$(FUZZTIME) ./internal/imagecrypt/
	go test -run=NONE -fuzz='^FuzzParseCursor$$' -fuzztime=$(FUZZTIME) ./internal/cluster/

# dend and den in BINDIR, den-init and the pinned runsc in LIBDIR, a
# systemd unit for dend with its settings in SYSCONFDIR/den/dend.env (kept
# if it exists), den's completions for bash, zsh and fish, and the man
# pages den(1), its verbs' and dend(8) in MANDIR. Without DESTDIR, on a
# host run by systemd, the unit is enabled so dend starts at boot; nothing
# is started.
install: build man install-files

# The man pages, gzipped as the release ships them, in BIN/man: den's from
# its help (den generate-man) and dend(8) from dend --help, by tools/dist.
man:
	rm -rf $(BIN)/man
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null) go run -C tools/dist . \
		-bin $(abspath $(BIN)) -version $(VERSION) -man $(abspath $(BIN))/man

install-files:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/den \
		$(DESTDIR)$(COMPLETIONDIR)/bash-completion/completions $(DESTDIR)$(COMPLETIONDIR)/zsh/site-functions \
		$(DESTDIR)$(COMPLETIONDIR)/fish/vendor_completions.d
	install -m 755 $(BIN)/dend $(BIN)/den $(DESTDIR)$(BINDIR)/
	install -m 755 $(BIN)/den-init $(DESTDIR)$(LIBDIR)/
	install -m 755 "$$(readlink -f $(BIN)/runsc)" $(DESTDIR)$(LIBDIR)/runsc
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' deploy/dend.service.in \
		> $(DESTDIR)$(UNITDIR)/dend.service
	chmod 644 $(DESTDIR)$(UNITDIR)/dend.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/den/dend.env ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/den/dend.env"; \
	else \
		sed -e 's|@LIBDIR@|$(LIBDIR)|g' deploy/dend.env.in > $(DESTDIR)$(SYSCONFDIR)/den/dend.env; \
		chmod 600 $(DESTDIR)$(SYSCONFDIR)/den/dend.env; \
	fi
	$(BIN)/den completion bash > $(DESTDIR)$(COMPLETIONDIR)/bash-completion/completions/den
	$(BIN)/den completion zsh > $(DESTDIR)$(COMPLETIONDIR)/zsh/site-functions/_den
	$(BIN)/den completion fish > $(DESTDIR)$(COMPLETIONDIR)/fish/vendor_completions.d/den.fish
	@if [ -d $(BIN)/man ]; then \
		install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 && \
		install -m 644 $(BIN)/man/man1/*.1.gz $(DESTDIR)$(MANDIR)/man1/ && \
		install -m 644 $(BIN)/man/man8/*.8.gz $(DESTDIR)$(MANDIR)/man8/; \
	else \
		echo "no man pages in $(BIN)/man: \`make man\` writes them (make install does)"; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload && systemctl enable dend.service && \
		echo "dend is enabled at boot: \`systemctl start dend\` starts it now"; \
	else \
		echo "then: systemctl daemon-reload && systemctl enable --now dend"; \
	fi

# A release in DIST (docs/install.md: From a release): the static binaries, the
# pinned runsc, the unit, completions and man pages in
# den_VERSION_linux_amd64.tar.gz, laid out as `make install` lays them
# out; den_VERSION_amd64.deb, made by tools/dist with nfpm, which
# installs them under /usr; and SHA256SUMS. Files' times and the man
# pages' dates are the commit's, so one commit builds the same release.
DIST ?= dist
dist: build
	rm -f $(DIST)/den_* $(DIST)/SHA256SUMS
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null) go run -C tools/dist . \
		-bin $(abspath $(BIN)) -repo $(CURDIR) -out $(abspath $(DIST)) -version $(VERSION)

# The previous release's package in dist/prev/, built from its tag by
# its own Makefile (PREV=TAG names another), for the upgrade run in the
# VM: `make dist dist-prev`, then
# `../shared/hostvm/run-in-vm scripts/hostvm-upgrade.sh`.
dist-prev:
	PREV=$(PREV) ./scripts/dist-prev.sh

vet:
	go vet ./...
	go vet -C tools/dist ./...
	go vet -C tools/shard ./...
	go run -C tools/house . -check -dir $(CURDIR)

clean:
	rm -rf bin dist
