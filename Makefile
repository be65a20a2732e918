# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run web test test-thorough lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

# Debian's Chromium for the trace-page browser test: part of installing, not of the suite's time
# (where it cannot be installed, the test says so and skips).
$(VENV)/.chromium: | $(BIN)/python
	scripts/ensure-chromium >/dev/null || true
	touch $@

## run: start the bot (configured platforms, else terminal chat with the offline demo model)
run: $(VENV)/.installed
	$(BIN)/reactbot $(ARGS)

## web: the web chat on http://127.0.0.1:8080/ (web.host / web.port to change it)
web: $(VENV)/.installed
	$(BIN)/reactbot serve --platform web $(ARGS)

# The coverage gate is on core, the part every surface relies on. Three workers on two cores:
# much of an integration test is waiting on a socket or a subprocess (measured: 2 workers
# 4:00, 3 workers 2:56, 4 workers 3:14-3:54 with more CPU spent on contention). Tests run in random
# order: pytest-randomly prints the seed, and `make test SEED=N` replays that order.
SEED ?=
WORKERS ?= 3
PYTEST_ARGS ?= -n $(WORKERS) $(if $(SEED),--randomly-seed=$(SEED)) --cov=core --cov-report=term:skip-covered --cov-fail-under=90
# Bytecode is cached even where the environment turns it off (PYTHONDONTWRITEBYTECODE):
# without it every worker and every `reactbot` a test starts compiles the whole tree again.
TEST_ENV = PYTHONDONTWRITEBYTECODE= PYTHON=$(BIN)/python

## test: the whole suite, with a Redis that answers (started if needed)
test: $(VENV)/.installed-dev $(VENV)/.chromium
	$(TEST_ENV) scripts/with-redis $(BIN)/python -m pytest $(PYTEST_ARGS)

## test-thorough: the same suite with every property test at its full number of examples
test-thorough: $(VENV)/.installed-dev $(VENV)/.chromium
	HYPOTHESIS_PROFILE=thorough $(TEST_ENV) scripts/with-redis $(BIN)/python -m pytest $(PYTEST_ARGS)

## lint: ruff, the formatter, mypy (strict) and the import-linter layer contracts
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/core_overhead.py
	$(BIN)/python bench/stream_parse.py
	PYTHON=$(BIN)/python scripts/with-redis $(BIN)/python bench/redis_history.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
