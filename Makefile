# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

## run: start the bot (configured platforms, else terminal chat with the offline demo model)
run: $(VENV)/.installed
	$(BIN)/reactbot $(ARGS)

# The coverage gate is on core, the part every surface relies on.
PYTEST_ARGS ?= --cov=core --cov-report=term:skip-covered --cov-fail-under=90

## test: the whole suite, with a Redis that answers (started if needed)
test: $(VENV)/.installed-dev
	PYTHON=$(BIN)/python scripts/with-redis $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/core_overhead.py
	$(BIN)/python bench/stream_parse.py
	PYTHON=$(BIN)/python scripts/with-redis $(BIN)/python bench/redis_history.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
