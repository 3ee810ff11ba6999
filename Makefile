# helix_django: the two commands of README.md.
#   make demo  - set up and run the example site (SQLite, in-memory layer, scripted model)
#   make test  - set up and run the whole test suite (starts Redis, PostgreSQL; needs Chromium)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	PYTHON=$(PY) bash scripts/demo.sh

test: $(VENV)/.installed
	PYTHON=$(PY) bash scripts/test.sh

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(VENV)/.installed
	$(PY) -m bench
