# Everything a fresh machine needs, from Python 3.11+ and make alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# checkov pins an older boto3 and packaging than the project's: it gets a virtual environment of its own.
CHECKOV_VERSION := 3.3.30
CHECKOV := $(VENV)/checkov/bin/checkov
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: synth manifests test lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,advisor,bench,observability]'
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $(STAMP)

## synth: the default app, offline: CloudFormation in cdk.out/, each endpoint's manifests in cdk.out/manifests/
synth: $(STAMP)
	$(BIN)/python app.py

## test: lint, type-check and the whole test suite
test: lint typecheck
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy app.py k8s/hyperpod_dpd constructs/hyperpod_dpd_cdk

bench: $(STAMP)
	$(BIN)/python bench/synth_bench.py
	$(BIN)/python bench/advise_bench.py

clean:
	rm -rf $(VENV) cdk.out dist .mypy_cache .ruff_cache .pytest_cache .hypothesis
