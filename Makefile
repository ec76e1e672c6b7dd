# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# A Python >= 3.12: $(PYTHON) if given, else pyenv's 3.12.*, else python3.12 on PATH.
PYTHON ?= $(shell ls -d $$(pyenv root 2>/dev/null)/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
ifeq ($(strip $(PYTHON)),)
PYTHON := $(shell command -v python3.12 2>/dev/null)
endif

.PHONY: setup demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "error: no Python 3.12 found (set PYTHON=/path/to/python3.12)"; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) -m agentrl.cli demo

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -n 2 --dist loadfile tests

lint: setup
	$(PY) -m ruff check .

bench: setup
	$(PY) -m agentrl.cli bench env_throughput

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
