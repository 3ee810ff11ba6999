# helix_django: the two commands of README.md.
#   make demo  - set up and run the example site (SQLite, in-memory layer, scripted model)
#   make test  - set up and run the whole test suite (starts Redis, PostgreSQL; needs Chromium;
#                also the real-host profile and Django 6.0 on Python 3.12 in .venv-dj60)
#   make test-quick - lint + the suite without browser, server-process and PostgreSQL tests (needs Redis)
#   make typecheck - mypy over the package (needs the dev extra: mypy, django-stubs)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

PY312 ?= python3.12

.PHONY: demo test test-quick lint typecheck bench

# The demo needs the app and the OpenAI SDK only; the tests need every extra.
$(VENV)/.installed-demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[openai,daphne]"
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

# The Django 6.0 job's own virtualenv (Python 3.12).
.venv-dj60/.installed: pyproject.toml
	$(PY312) -m venv .venv-dj60
	.venv-dj60/bin/python -m pip install --quiet --upgrade pip
	.venv-dj60/bin/python -m pip install --quiet -e ".[test]" "Django>=6.0,<6.1"
	touch $@

demo: $(VENV)/.installed-demo
	PYTHON=$(PY) bash scripts/demo.sh

test: $(VENV)/.installed-dev
	PYTHON=$(PY) bash scripts/test.sh

test-quick: $(VENV)/.installed-dev
	HELIX_QUICK=1 HELIX_SERVICES=redis PYTHON=$(PY) bash scripts/test.sh

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(PY) -m mypy helix_django

bench: $(VENV)/.installed-test
	$(PY) -m bench
