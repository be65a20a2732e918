# Two commands on a fresh machine: `make run` and `make test`.
#
# Installs are exactly uv.lock (every version pinned, every file's hash checked) through uv,
# itself pinned and kept in .uv/ beside the project. PYTHON picks the interpreter (3.11, 3.12
# and 3.13 are tested): python3 uses .venv, any other its own (.venv-python3.12, ...), so
# `make test PYTHON=python3.12` leaves .venv alone. `make lock` refreshes the lock;
# `make test-latest` runs lint and the suite on the newest versions pyproject.toml allows.
PYTHON ?= python3
UV_VERSION := 0.13.9
# A pyenv shim answers only for the versions pyenv has selected: ask it with every installed one.
PYTHON_BIN := $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null || PYENV_VERSION=$$(pyenv versions --bare 2>/dev/null | tr '\n' ':') $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)
VENV ?= $(if $(filter python3,$(PYTHON)),.venv,.venv-$(notdir $(PYTHON)))
BIN := $(VENV)/bin
UV := .uv/bin/uv
# uv never downloads an interpreter: the one PYTHON names is used, or the install stops.
SYNC = UV_PROJECT_ENVIRONMENT=$(VENV) UV_PYTHON_DOWNLOADS=never $(UV) sync --frozen --quiet --python $(PYTHON_BIN)

.PHONY: run web test test-thorough test-latest lock lint typecheck bench clean

$(UV):
	@test -n "$(PYTHON_BIN)" || { echo "make: $(PYTHON) is not a Python interpreter here" >&2; exit 1; }
	$(PYTHON_BIN) -m venv .uv
	.uv/bin/python -m pip install -q uv==$(UV_VERSION)

# --inexact: `make run` after `make test` keeps the dev extra instead of uninstalling it.
$(VENV)/.installed: pyproject.toml uv.lock | $(UV)
	$(SYNC) --inexact
	touch $@

$(VENV)/.installed-dev: pyproject.toml uv.lock | $(UV)
	$(SYNC) --extra dev
	touch $@ $(VENV)/.installed

# Debian's Chromium for the trace-page browser test: part of installing, not of the suite's time
# (where it cannot be installed, the test says so and skips).
$(VENV)/.chromium: | $(VENV)/.installed-dev
	scripts/ensure-chromium >/dev/null || true
	touch $@

# Debian's espeak-ng, which speaks the voice tests' questions (where it cannot be installed,
# the real-speech test says so and skips).
$(VENV)/.espeak: | $(VENV)/.installed-dev
	scripts/ensure-espeak >/dev/null || true
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
test: $(VENV)/.installed-dev $(VENV)/.chromium $(VENV)/.espeak
	$(TEST_ENV) scripts/with-redis $(BIN)/python -m pytest $(PYTEST_ARGS)

## test-thorough: the same suite with every property test at its full number of examples
test-thorough: $(VENV)/.installed-dev $(VENV)/.chromium $(VENV)/.espeak
	HYPOTHESIS_PROFILE=thorough $(TEST_ENV) scripts/with-redis $(BIN)/python -m pytest $(PYTEST_ARGS)

## lint: ruff, the formatter, mypy (strict) and the import-linter layer contracts
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## lock: re-resolve uv.lock to the newest versions the ranges allow (run test-latest first)
lock: | $(UV)
	UV_PYTHON_DOWNLOADS=never $(UV) lock --upgrade --python $(PYTHON_BIN)

## test-latest: lint and the whole suite in a throwaway venv with the newest allowed versions
LATEST := .venv-latest
test-latest: | $(UV)
	rm -rf $(LATEST)
	UV_PYTHON_DOWNLOADS=never $(UV) venv --quiet --python $(PYTHON_BIN) $(LATEST)
	$(UV) pip install --quiet --python $(LATEST)/bin/python --upgrade -e '.[dev]'
	touch $(LATEST)/.installed $(LATEST)/.installed-dev
	$(LATEST)/bin/python scripts/check-lock --report
	$(MAKE) lint test VENV=$(LATEST)

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/core_overhead.py
	$(BIN)/python bench/stream_parse.py
	PYTHON=$(BIN)/python scripts/with-redis $(BIN)/python bench/redis_history.py

clean:
	rm -rf .venv .venv-* .uv .pytest_cache .mypy_cache .ruff_cache
