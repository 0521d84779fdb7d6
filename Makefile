# Everything a fresh machine needs, from Python 3.11+ and make alone.
#   make synth   installs what a synth needs (the package and the dashboard SDK) and synthesizes the default app
#   make test    installs everything else too (test tools, the advisor, the benchmark, checkov) and runs the suite
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
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP_FLAGS := --progress-bar off

.PHONY: synth test test-fast lint typecheck bench clean venv-size lock lock-check

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
SHOW_PACKAGES := grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true

$(SYNTH_STAMP): pyproject.toml $(LOCKS)/synth.txt $(LOCKS)/build.txt
	@$(CHECK_PYTHON)
	@test -d $(VENV) || { echo ">>> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo ">>> installing hyperpod-dpd with [$(SYNTH_EXTRAS)] as $(LOCKS)/synth.txt pins it: aws-cdk-lib, its Node.js"
	@echo "    runtime, cdk8s, boto3, the Kubernetes client (about 0.9 GB; 2-7 minutes, mostly download; one line per package follows)"
	$(BIN)/python $(LOCKED_INSTALL) -r $(LOCKS)/synth.txt | $(SHOW_PACKAGES)
	@$(BIN)/python scripts/lock.py check synth --allow-more --without-project || { \
	  echo "error: the install above failed; see its messages"; exit 1; }
	$(BIN)/python -m pip install $(PIP_FLAGS) --quiet --no-deps --build-constraint $(LOCKS)/build.txt -e .
	@$(BIN)/python scripts/lock.py check synth --allow-more
	@touch $@

$(TEST_STAMP): $(SYNTH_STAMP) $(LOCKS)/test.txt $(LOCKS)/checkov.txt
	@echo ">>> installing the test tools and extras [$(TEST_EXTRAS)] as $(LOCKS)/test.txt pins them: pytest, mypy,"
	@echo "    cfn-lint, moto, the advisor's performance database, genai-bench and aiperf (about 3 GB more; 4-10 minutes)"
	$(BIN)/python $(LOCKED_INSTALL) -r $(LOCKS)/test.txt | $(SHOW_PACKAGES)
	$(BIN)/python scripts/lock.py check test --remove-unlisted
	@echo ">>> installing checkov in $(VENV)/checkov as $(LOCKS)/checkov.txt pins it (its own venv: it pins older boto3; ~0.3 GB, 1 minute)"
	@test -d $(VENV)/checkov || $(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python $(LOCKED_INSTALL) --quiet -r $(LOCKS)/checkov.txt
	$(BIN)/python scripts/lock.py check checkov --python $(VENV)/checkov/bin/python --remove-unlisted
	@touch $@

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

## synth: the default app, offline: CloudFormation in cdk.out/, each endpoint's manifests in cdk.out/manifests/
synth: $(SYNTH_STAMP)
	@echo ">>> synthesizing the default app (the first run compiles and starts jsii: about 30 s)"
	$(BIN)/python app.py

## test: lint, type-check and the whole test suite (promtool, when installed, runs the alert-behaviour tests)
test: lock-check lint typecheck
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
	rm -rf $(VENV) cdk.out dist .mypy_cache .ruff_cache .pytest_cache .hypothesis .grimp_cache .import_linter_cache
