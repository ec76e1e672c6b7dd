# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# A Python >= 3.12: $(PYTHON) if given, else pyenv's 3.12.*, else python3.12 on PATH.
PYTHON ?= $(shell ls -d $$(pyenv root 2>/dev/null)/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
ifeq ($(strip $(PYTHON)),)
PYTHON := $(shell command -v python3.12 2>/dev/null)
endif

# pyproject.toml declares compatible ranges; constraints.txt is the exact,
# known-good set that `make` and CI install (`make lock` regenerates it).
CONSTRAINTS := constraints.txt
# The venv's packages are installed by uv (pinned; pip installs it from the
# same registry): the same versions as pip's install of the same
# constraints, in ~20 s instead of ~90 s on 2 cores. `pip install .` stays
# the users' path and .ci/wheel_check tests it.
UV_VERSION := 0.13.9

# Python's bytecode is cached, in the venv's own folder: with
# PYTHONDONTWRITEBYTECODE set (as on this project's machines) and uv's
# install (which compiles nothing), every process the tests start compiled
# jax, flax and the tests from source again (6 s to import jax, flax and optax
# instead of 2; pytest's assertion rewriting of 300 test files in each
# worker). The source tree stays free of __pycache__ folders.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache

.PHONY: setup demo test test-long test-heavy lint bench lock clean

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	@if [ -z "$(PYTHON)" ]; then echo "error: no Python 3.12 found (set PYTHON=/path/to/python3.12)"; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "uv==$(UV_VERSION)"
	$(VENV)/bin/uv pip install --quiet --python $(PY) -c $(CONSTRAINTS) -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m agentrl.cli demo

# `make test`: ruff and every test not marked `long` or `heavy` (8-15
# minutes on 2 cores from an empty JAX cache; README); `make test-long`: the `long` ones (CI runs both);
# `make test-heavy`: the `heavy` ones, the same paths again for every other
# experiment preset and MuJoCo family (not in CI: its 90 minutes).
# --max-worker-restart=0: a crashed worker fails the run at once (with
# --dist loadfile, xdist would hang on the files left to the dead worker).
# Both run under JAX's key-reuse checker (a key used twice fails the test;
# inherited by the commands tests start).
test: setup
	$(PY) -m ruff check .
	JAX_DEBUG_KEY_REUSE=1 $(PY) -m pytest -n 2 --dist loadfile --max-worker-restart=0 -m "not long and not heavy" tests

test-long: setup
	JAX_DEBUG_KEY_REUSE=1 $(PY) -m pytest -n 2 --dist loadfile --max-worker-restart=0 -m long tests

test-heavy: setup
	$(PY) -m pytest -n 2 --dist loadfile --max-worker-restart=0 -m heavy tests

lint: setup
	$(PY) -m ruff check .

bench: setup
	$(PY) -m agentrl.cli bench env_throughput

# Regenerate constraints.txt with the newest versions the ranges in
# pyproject.toml allow (.ci/lock says more); then run `make test`.
lock:
	@if [ -z "$(PYTHON)" ]; then echo "error: no Python 3.12 found (set PYTHON=/path/to/python3.12)"; exit 1; fi
	PYTHON=$(PYTHON) bash .ci/lock

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
