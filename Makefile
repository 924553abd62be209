# llm-monitor: the targets a newcomer expects. `make run` and `make test` work on a fresh clone.
# `make run` needs only Python >= 3.11 (PYTHON=python3.12 where `python3` is older) and no root;
# `make test` also needs system packages, which scripts/install-deps.sh names when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
DATA ?= ../shared/data
RUN_ARGS ?=

.PHONY: help install install-run run report test test-fast lint bench schemas grafana clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# The runtime dependencies only (make run, make report); the full stamp implies them.
$(RUN_STAMP): pyproject.toml scripts/install-deps.sh
	if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ] && [ $(STAMP) -nt scripts/install-deps.sh ]; \
	then touch $(RUN_STAMP); else bash scripts/install-deps.sh $(PYTHON) $(VENV) run && touch $(RUN_STAMP); fi

$(STAMP): pyproject.toml scripts/install-deps.sh
	bash scripts/install-deps.sh $(PYTHON) $(VENV) test
	touch $(STAMP)

install-run: $(RUN_STAMP)  ## create .venv with the package and its runtime dependencies only

install: $(STAMP)  ## create .venv and install the package with its test dependencies

run: $(RUN_STAMP)  ## the live monitor on the embedded default, replaying real MMLU-Pro results
	$(BIN)/llm-monitor demo --data $(DATA) $(RUN_ARGS)

report: $(RUN_STAMP)  ## the offline resolution report on the real MMLU-Pro table
	$(BIN)/llm-monitor report $(DATA)/mmlu_pro_item_correctness_wide.csv --exclude src --strata-col category --planned-models 32 --seed 0

test: $(STAMP) lint  ## the whole suite: lint, types, unit, property, doctests, statistical and integration tests
	$(BIN)/python -m pytest -q -n auto -m "not integration"
	$(BIN)/python -m pytest -q -m integration  # one at a time: servers, brokers and timings

test-fast: $(STAMP)  ## unit, property and doctests: no tests marked slow or integration, on every core (< 2 min)
	$(BIN)/python -m pytest -q -n auto -m "not slow and not integration"

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check monitor tests bench grafana
	$(BIN)/mypy

bench: $(STAMP)  ## benchmarks against named peers; figures go to BENCHMARKS.md
	$(BIN)/python -m bench --table

schemas: $(STAMP)  ## regenerate the JSON Schema contract and example events in schemas/
	$(BIN)/llm-monitor schemas --out schemas

grafana: $(STAMP)  ## regenerate the Grafana dashboard and alert provisioning in grafana/ (dev extra)
	$(BIN)/python -m grafana.build

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
