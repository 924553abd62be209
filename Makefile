# llm-monitor: the targets a newcomer expects. `make run` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA ?= ../shared/data

.PHONY: help install run report test test-fast lint bench schemas grafana clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml scripts/install-deps.sh
	bash scripts/install-deps.sh $(PYTHON) $(VENV)
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the package with its test dependencies

run: $(STAMP)  ## the live monitor on the embedded default, replaying real MMLU-Pro results
	$(BIN)/llm-monitor demo --data $(DATA)

report: $(STAMP)  ## the offline resolution report on the real MMLU-Pro table
	$(BIN)/llm-monitor report $(DATA)/mmlu_pro_item_correctness_wide.csv --exclude src --cluster-col category

test: $(STAMP) lint  ## the whole suite: lint, types, unit, property, doctests, statistical and integration tests
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)  ## unit, property and doctests: no tests marked slow or integration (< 2 min)
	$(BIN)/python -m pytest -q -m "not slow and not integration"

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check monitor tests bench grafana
	$(BIN)/mypy

bench: $(STAMP)  ## benchmarks against named peers; figures go to BENCHMARKS.md
	$(BIN)/python -m bench

schemas: $(STAMP)  ## regenerate the JSON Schema contract and example events in schemas/
	$(BIN)/llm-monitor schemas --out schemas

grafana: $(STAMP)  ## regenerate the Grafana dashboard and alert provisioning in grafana/ (dev extra)
	$(BIN)/python -m grafana.build

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
