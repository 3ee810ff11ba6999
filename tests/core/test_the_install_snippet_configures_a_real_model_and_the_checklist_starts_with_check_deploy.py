"""README gives a newcomer the two commands, a real model in its install section and one production page.

- The two commands (``make demo``, ``make test``) are shown as commands, are Makefile
  targets, and CI (``.ci/run``) runs ``make test``.
- The install section's settings snippet, run as a host's settings would run it, configures
  the OpenAI provider from the environment (``OPENAI_BASE_URL``, ``OPENAI_MODEL``): helix's
  checks pass it and W007 (the scripted model out of ``DEBUG``) stays quiet.
- docs/production.md exists, README links it, and its checklist starts with
  ``manage.py check --deploy``.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.test import override_settings

from helix_django.checks import check_scripted_provider, check_settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


def install_settings(environ: dict[str, str], monkeypatch) -> dict:
    """Run README's settings snippet after a fresh project's INSTALLED_APPS and DATABASES."""
    snippet = next(block for block in python_blocks(README) if block.startswith("# settings.py"))
    for name in ("OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    namespace: dict = {
        "INSTALLED_APPS": ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes"],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}},
    }
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102 - README's own words
    return namespace


def test_the_two_commands_are_shown_are_make_targets_and_ci_runs_make_test():
    assert "```sh\nmake demo\n```" in README
    assert "```sh\nmake test\n```" in README
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, flags=re.M) and re.search(r"^test:", makefile, flags=re.M)
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in ci


def test_the_install_snippet_configures_a_real_model_from_the_environment(monkeypatch):
    helix = install_settings({}, monkeypatch)["HELIX"]
    agent = helix["AGENTS"]["default"]
    assert agent["PROVIDER"]["BACKEND"] == "helix_django.runtime.providers.openai.OpenAIProvider"
    assert agent["PROVIDER"]["OPTIONS"]["BASE_URL"] is None and agent["MODEL"] == "gpt-4o-mini"
    with override_settings(DEBUG=False, HELIX=helix):
        assert check_scripted_provider() == []
        assert [m.id for m in check_settings() if m.id.startswith("helix_django.E")] == []

    local = install_settings({"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_MODEL": "llama3.2"}, monkeypatch)
    agent = local["HELIX"]["AGENTS"]["default"]
    assert agent["PROVIDER"]["OPTIONS"]["BASE_URL"] == "http://localhost:11434/v1" and agent["MODEL"] == "llama3.2"


def test_readme_links_the_production_page_whose_checklist_starts_with_check_deploy():
    assert "(docs/production.md)" in README
    page = (ROOT / "docs" / "production.md").read_text()
    checklist = page.split("## Checklist", 1)[1]
    first = next(line for line in checklist.splitlines() if line.strip())
    assert first.startswith("1. `python manage.py check --deploy`")
    for shape in ("one process on SQLite", "PostgreSQL + Redis", "Celery"):
        assert shape in page
