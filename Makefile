# Everything a fresh machine needs, from Python 3.11+ and make alone.
#   make synth   installs what a synth needs (the package and the dashboard SDK) and synthesizes the default app
#   make test    installs everything else too (test tools, the advisor, the benchmark, checkov, the engine) and runs the suite
#   make engine  installs vLLM in .venv-engine, whose own checks `validate --engine` and the tests run
#   make test-fast  runs the suite without its slow tests (the loop while changing code)
#   make lock    re-resolves the locks (locks/*.txt) that both install from; UPGRADE=all moves every package
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install level: `make test` after `make synth` adds the rest to the same venv.
SYNTH_STAMP := $(VENV)/.installed-synth
TEST_STAMP := $(VENV)/.installed-test
SYNTH_EXTRAS := observability
TEST_EXTRAS := dev,advisor,bench,observability
MIN_PYTHON := 3.11
# What each level takes on disk (du of .venv after a fresh `make synth`, then what `make test` adds, checkov's venv and
# the bytecode caches included; Linux x86_64, Python 3.11). The README and docs/setup.md quote these two figures,
# and tests/docs/test_docs.py holds them equal; docs/setup.md's table splits them per extra (package files only).
SYNTH_SIZE := 0.9 GB
TEST_SIZE := 2.6 GB
ENGINE_SIZE := 8.3 GB
ENGINE_DOWNLOAD := 4.5 GB
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP_FLAGS := --progress-bar off

.PHONY: synth test test-fast engine lint typecheck bench clean venv-size lock lock-check

# Run first in the install recipe: stop before anything is created when $(PYTHON) is too old, and
# rebuild a venv that another Python made (a failed first try with an old python3 leaves one behind).
define CHECK_PYTHON
$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
  echo "error: hyperpod-dpd needs Python $(MIN_PYTHON) or newer; '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo 'not found')."; \
  echo "Fix: install Python $(MIN_PYTHON)+ and run 'make $(or $(MAKECMDGOALS),synth) PYTHON=python3.12' (or python3.11, python3.13)."; \
  exit 2; }; \
if [ -e $(BIN)/python ] && [ "$$($(BIN)/python -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" \
     != "$$($(PYTHON) -c 'import sys; print(sys.version_info[:2])')" ]; then \
  echo "note: $(VENV) was built by another Python ($$($(BIN)/python --version 2>&1 || echo 'no longer runs')); rebuilding it with $$($(PYTHON) --version)"; \
  rm -rf $(VENV); \
fi
endef

# Every install level installs exactly its lock (locks/*.txt, written by `make lock`): every package pinned
# with its hashes, so a new upstream release changes nothing until the locks move. pip still reads each
# package's dependencies (among the pinned versions only; one missing from the lock is an error in hash mode)
# to install in dependency order: aws-cdk-lib must be installed after aws-cdk.cloud-assembly-schema, whose
# aws_cdk/cloud_assembly_schema/__init__.py it overwrites with its own (--no-deps reversed that).
# Wheels only: a package without a wheel for this platform fails loudly, where building it from source would
# fetch build tools no lock pins.
LOCKS := locks
LOCKED_INSTALL := -m pip install $(PIP_FLAGS) --require-hashes --only-binary=:all:
# pip's lines, and a line where it unpacks for a minute without a word (scripts/pip_lines.awk).
SHOW_PACKAGES := awk -v VENV=$(VENV) -f scripts/pip_lines.awk || true

$(SYNTH_STAMP): pyproject.toml $(LOCKS)/synth.txt $(LOCKS)/build.txt
	@$(CHECK_PYTHON)
	@test -d $(VENV) || { echo ">>> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo ">>> installing hyperpod-dpd with [$(SYNTH_EXTRAS)] as $(LOCKS)/synth.txt pins it: aws-cdk-lib, its Node.js"
	@echo "    runtime, cdk8s, boto3, the Kubernetes client (about $(SYNTH_SIZE); 2-7 minutes, mostly download; one line per package follows)"
	$(BIN)/python $(LOCKED_INSTALL) -r $(LOCKS)/synth.txt | $(SHOW_PACKAGES)
	@$(BIN)/python scripts/lock.py check synth --allow-more --without-project || { \
	  echo "error: the install above failed; see its messages"; exit 1; }
	@echo ">>> linking this checkout into $(VENV) (an editable install: edits take effect without reinstalling). setuptools"
	@echo "    prints a boxed BuildBackendWarning about folders named like the package: no such folder is at the top of"
	@echo "    this checkout (the packages live under k8s/ and constructs/), so it does not apply; docs/setup.md says why"
	$(BIN)/python -m pip install $(PIP_FLAGS) --quiet --no-deps --build-constraint $(LOCKS)/build.txt -e .
	@$(BIN)/python scripts/lock.py check synth --allow-more
	@touch $@

$(TEST_STAMP): $(SYNTH_STAMP) $(LOCKS)/test.txt $(LOCKS)/checkov.txt
	@echo ">>> installing the test tools and extras [$(TEST_EXTRAS)] as $(LOCKS)/test.txt pins them: pytest, mypy,"
	@echo "    cfn-lint, moto, the advisor's performance database, genai-bench and aiperf (about $(TEST_SIZE) more; 4-10 minutes)"
	$(BIN)/python $(LOCKED_INSTALL) -r $(LOCKS)/test.txt | $(SHOW_PACKAGES)
	$(BIN)/python scripts/lock.py check test --remove-unlisted
	@echo ">>> installing checkov in $(VENV)/checkov as $(LOCKS)/checkov.txt pins it (its own venv: it pins older boto3; ~0.3 GB, 1 minute)"
	@test -d $(VENV)/checkov || $(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python $(LOCKED_INSTALL) --quiet -r $(LOCKS)/checkov.txt
	$(BIN)/python scripts/lock.py check checkov --python $(VENV)/checkov/bin/python --remove-unlisted
	@touch $@

# vLLM as the worker image runs it, in a venv of its own (its torch and pins are not the project's): the oracle of
# `hyperpod-dpd validate --engine` and of the differential tests (hyperpod_dpd/oracle). The lock leaves out GPU kernels
# the checks never import, so it installs with --no-deps. The stub CUDA driver it needs is compiled here, once.
ENGINE_VENV := .venv-engine
ENGINE_STAMP := $(ENGINE_VENV)/.installed
ENGINE_SCRIPT := k8s/hyperpod_dpd/oracle/vllm_checks.py
CC ?= cc

$(ENGINE_STAMP): $(LOCKS)/engine.txt $(ENGINE_SCRIPT)
	@$(CHECK_PYTHON)
	@command -v $(CC) >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 || { \
	  echo "error: the engine check needs a C compiler ('$(CC)') and 'nm' once, to build a stub CUDA driver."; \
	  echo "Fix: install them (Debian/Ubuntu: apt-get install gcc binutils; Amazon Linux: dnf install gcc binutils)"; \
	  echo "and run 'make engine' again, or 'make engine CC=clang'."; exit 2; }
	@echo ">>> installing vLLM in $(ENGINE_VENV) as $(LOCKS)/engine.txt pins it (torch with its CUDA libraries:"
	@echo "    about $(ENGINE_DOWNLOAD) download, $(ENGINE_SIZE) on disk, 3-11 minutes; no GPU is needed)"
	@test -d $(ENGINE_VENV) || $(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/python $(LOCKED_INSTALL) --no-deps -r $(LOCKS)/engine.txt | $(SHOW_PACKAGES)
	$(PYTHON) scripts/lock.py check engine --python $(ENGINE_VENV)/bin/python --remove-unlisted
	$(ENGINE_VENV)/bin/python $(ENGINE_SCRIPT) build-stub $(ENGINE_VENV)/stub
	@touch $@

## engine: vLLM in its own venv, for `hyperpod-dpd validate --engine` (make test installs it too)
engine: $(ENGINE_STAMP)

## lock: re-resolve every install level from pyproject.toml into locks/*.txt (needs the package index), keeping
## each pin that still fits; UPGRADE=all moves every package to its newest allowed version, UPGRADE=a,b only those.
## A refresh is its own commit, and the suite and the snapshots decide whether it lands.
UPGRADE ?=
lock:
	@$(CHECK_PYTHON)
	$(PYTHON) scripts/lock.py compile --upgrade '$(UPGRADE)'

## lock-check: the venvs hold exactly what the locks pin (`make test` runs it first)
# A venv that drifted loses its stamp, so the next `make test` reinstalls from the locks.
lock-check: $(TEST_STAMP)
	@$(BIN)/python scripts/lock.py check test || { rm -f $(TEST_STAMP); exit 1; }
	@$(BIN)/python scripts/lock.py check checkov --python $(VENV)/checkov/bin/python || { rm -f $(TEST_STAMP); exit 1; }
	@if [ -e $(ENGINE_STAMP) ]; then $(BIN)/python scripts/lock.py check engine --python $(ENGINE_VENV)/bin/python \
	  || { rm -f $(ENGINE_STAMP); exit 1; }; fi

## synth: the default app, offline: CloudFormation in cdk.out/, each endpoint's manifests in cdk.out/manifests/
synth: $(SYNTH_STAMP)
	@echo ">>> synthesizing the default app (the first run compiles and starts jsii: about 30 s)"
	$(BIN)/python app.py

## test: lint, type-check and the whole test suite (promtool, when installed, runs the alert-behaviour tests)
test: lock-check engine lint typecheck
	$(BIN)/python -m pytest -rs

## test-fast: the suite without its slow tests (the real benchmark clients against the stub server, the advisor's
## database): the loop to run while changing code; `make test` runs everything
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -rs -m "not slow"

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: $(TEST_STAMP)
	@echo ">>> type-checking (mypy --strict; about 2 minutes on a first run, seconds once cached)"
	$(BIN)/mypy app.py k8s/hyperpod_dpd constructs/hyperpod_dpd_cdk

bench: $(TEST_STAMP)
	$(BIN)/python bench/synth_bench.py
	$(BIN)/python bench/advise_bench.py
	$(BIN)/python bench/emulator_bench.py
	$(BIN)/python bench/trace_bench.py
	$(BIN)/python bench/advise_trace_bench.py

## venv-size: what each install level and extra costs on disk, measured from the installed packages
venv-size: $(TEST_STAMP)
	$(BIN)/python scripts/venv_size.py

clean:
	rm -rf $(VENV) $(ENGINE_VENV) cdk.out dist .mypy_cache .ruff_cache .pytest_cache .hypothesis .grimp_cache .import_linter_cache
