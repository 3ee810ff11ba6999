"""Packaging metadata (issue 19, finding 10): project URLs, classifiers, one JSON-Schema library."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_project_names_its_urls():
    assert set(PROJECT["urls"]) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith("https://github.com/helix-django/helix_django") for url in PROJECT["urls"].values())


def test_the_classifiers_name_every_supported_django_and_python():
    classifiers = set(PROJECT["classifiers"])
    assert {"Framework :: Django :: 5.2", "Framework :: Django :: 6.0"} <= classifiers
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 14)} <= classifiers


def test_one_json_schema_library_is_installed_and_used():
    names = {re.split(r"[<>=\[ ;]", requirement)[0].lower() for requirement in PROJECT["dependencies"]}
    assert names & {"jsonschema", "fastjsonschema"} == {"jsonschema"}
    importing = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "helix_django").rglob("*.py")
        if re.search(r"^\s*(import|from) fastjsonschema", path.read_text(), re.MULTILINE)
    ]
    assert importing == []
