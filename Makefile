# helix_django: the two commands of README.md.
#   make demo  - set up and run the example site (SQLite, in-memory layer, scripted model)
#   make test  - set up and run the whole test suite (starts Redis, PostgreSQL; needs Chromium)
#   make typecheck - mypy over the package (needs the dev extra: mypy, django-stubs)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint typecheck bench

# The demo needs the app and the OpenAI SDK only; the tests need every extra.
$(VENV)/.installed-demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[openai]"
	touch $@

$(VENV)/.installed-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed-demo

$(VENV)/.installed-dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed-test $(VENV)/.installed-demo

demo: $(VENV)/.installed-demo
	PYTHON=$(PY) bash scripts/demo.sh

test: $(VENV)/.installed-test
	PYTHON=$(PY) bash scripts/test.sh

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(PY) -m mypy helix_django

bench: $(VENV)/.installed-test
	$(PY) -m bench
