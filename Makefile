# Everything a fresh machine needs, from Python 3.11+ and make alone.
#   make synth   installs what a synth needs (the package and the dashboard SDK) and synthesizes the default app
#   make test    installs everything else too (test tools, the advisor, the benchmark, checkov) and runs the suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install level: `make test` after `make synth` adds the rest to the same venv.
SYNTH_STAMP := $(VENV)/.installed-synth
TEST_STAMP := $(VENV)/.installed-test
SYNTH_EXTRAS := observability
TEST_EXTRAS := dev,advisor,bench,observability
# checkov pins an older boto3 and packaging than the project's: it gets a virtual environment of its own.
CHECKOV_VERSION := 3.3.30
CHECKOV := $(VENV)/checkov/bin/checkov
MIN_PYTHON := 3.11
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP_FLAGS := --progress-bar off

.PHONY: synth test lint typecheck bench clean venv-size

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

$(SYNTH_STAMP): pyproject.toml
	@$(CHECK_PYTHON)
	@test -d $(VENV) || { echo ">>> creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo ">>> installing hyperpod-dpd with [$(SYNTH_EXTRAS)]: aws-cdk-lib, its Node.js runtime, cdk8s, boto3, the"
	@echo "    Kubernetes client (about 0.9 GB; 2-7 minutes, mostly download; one line per package follows)"
	$(BIN)/python -m pip install $(PIP_FLAGS) --quiet --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[$(SYNTH_EXTRAS)]' | grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true
	@$(BIN)/python -c 'import hyperpod_dpd_cdk' || { echo "error: the install above failed; see its messages"; exit 1; }
	@touch $@

# The benchmark clients' dependency trees at the versions of the locks the pod installs, so the tests run the
# client the pod runs (a test fails when the two drift).
CLIENT_LOCKS := k8s/hyperpod_dpd/data/genai_bench_lock.json k8s/hyperpod_dpd/data/aiperf_lock.json
BENCH_CONSTRAINTS := $(VENV)/bench-constraints.txt

$(TEST_STAMP): $(SYNTH_STAMP) $(CLIENT_LOCKS)
	@echo ">>> installing the test tools and extras [$(TEST_EXTRAS)]: pytest, mypy, cfn-lint, moto, the advisor's"
	@echo "    performance database, genai-bench and aiperf (about 3 GB more; 4-10 minutes)"
	$(BIN)/python -c 'import json, sys; print("".join(sorted({w["name"] + "==" + w["version"] + "\n" for p in sys.argv[1:] for w in json.load(open(p))["wheels"]})), end="")' $(CLIENT_LOCKS) > $(BENCH_CONSTRAINTS)
	$(BIN)/python -m pip install $(PIP_FLAGS) -c $(BENCH_CONSTRAINTS) -e '.[$(TEST_EXTRAS)]' | grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true
	@$(BIN)/python -c 'import pytest, mypy' || { echo "error: the install above failed; see its messages"; exit 1; }
	@echo ">>> installing checkov $(CHECKOV_VERSION) in $(VENV)/checkov (its own venv: it pins older boto3; ~0.3 GB, 1 minute)"
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install $(PIP_FLAGS) --quiet 'checkov==$(CHECKOV_VERSION)'
	@touch $@

## synth: the default app, offline: CloudFormation in cdk.out/, each endpoint's manifests in cdk.out/manifests/
synth: $(SYNTH_STAMP)
	@echo ">>> synthesizing the default app (the first run compiles and starts jsii: about 30 s)"
	$(BIN)/python app.py

## test: lint, type-check and the whole test suite (promtool, when installed, runs the alert-behaviour tests)
test: lint typecheck
	$(BIN)/python -m pytest -rs

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
