"""Every ``HELIX`` setting, ``manage.py`` command, check id and relative link README.md and docs/*.md name exists.

- A setting named as ``HELIX["NAME"]`` or as a top-level key of a ``HELIX = {...}`` dict is a
  key of ``helix_django.conf.DEFAULTS``; the settings table (docs/configuration.md) lists only
  such keys, and every key of ``DEFAULTS``.
- A command named as ``manage.py NAME`` (or ``helix_NAME --option``) is a command of Django, of
  an app the docs tell a host to install, of helix_django or of the example site; the options
  given to a helix command are options of its parser.
- README stays under 2 000 words and its launcher table lists the local, Django Tasks and
  Celery launchers.
- A check id ``helix_django.W007`` is one a check of helix_django reports.
- A relative link ``[text](path#anchor)`` points at a file that exists and, with an anchor, at
  a heading of that Markdown file (GitHub's anchors).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from django.core.management import load_command_class

from helix_django.conf import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Packages whose commands the docs name: Django, DRF's token app, Django Tasks' database worker,
# Channels and daphne, helix_django and the example site.
COMMAND_PACKAGES = ("django", "rest_framework", "django_tasks_db", "channels", "daphne", "helix_django")


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def dict_keys_after(text: str, start: int) -> list[str]:
    """Return the top-level string keys of the dict literal whose ``{`` is at ``start``."""
    depth, keys, position = 0, [], start
    while position < len(text):
        char = text[position]
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth == 0:
                break
        elif char in "\"'" and depth == 1:
            end = text.index(char, position + 1)
            if re.match(r"\s*:", text[end + 1 :]):
                keys.append(text[position + 1 : end])
            position = end
        position += 1
    return keys


def settings_named(text: str) -> set[str]:
    """Return the ``HELIX`` keys ``text`` names: ``HELIX["NAME"]`` and ``HELIX = {"NAME": ...}``."""
    names = set(re.findall(r"""HELIX\[["']([A-Za-z_]+)["']\]""", text))
    for match in re.finditer(r"HELIX\s*=\s*\{", text):
        names |= set(dict_keys_after(text, match.end() - 1))
    return names


def known_commands() -> dict[str, Path]:
    """Return every management command of COMMAND_PACKAGES and the example site, by name."""
    roots = [Path(importlib.util.find_spec(name).origin).parent for name in COMMAND_PACKAGES]
    roots.append(ROOT / "example_project")
    return {
        path.stem: path
        for root in roots
        for path in root.rglob("management/commands/*.py")
        if not path.stem.startswith("_")
    }


def commands_named(text: str) -> set[tuple[str, tuple[str, ...]]]:
    """Return ``(command, options)`` for each ``manage.py NAME --opt`` or ``helix_NAME --opt`` in ``text``."""
    found = set()
    pattern = r"(?:manage\.py\s+([a-z][a-z_]*)|\b(helix_[a-z_]+)(?=\s+--))((?:\s+--?[a-z][-a-z]*(?:[ =][^\s`'\"]+)?)*)"
    for match in re.finditer(pattern, text):
        options = tuple(re.findall(r"(?<!\S)(--?[a-z][-a-z]*)", match.group(3)))
        found.add((match.group(1) or match.group(2), options))
    return found


def github_anchor(heading: str) -> str:
    """Return the anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {github_anchor(h) for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M)}


def relative_links(text: str) -> list[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [
        target
        for target in re.findall(r"\]\(([^)\s]+)\)", text)
        if not re.match(r"[a-z][a-z+.-]*:", target)  # http:, https:, mailto:
    ]


def test_the_scanners_find_what_they_look_for():
    text = 'HELIX["AGENTS"] and HELIX = {"LAUNCHER": {"BACKEND": "x"}, "DRAIN_SECONDS": 5} then `manage.py helix_recover --every 30 --dry-run` and `helix_purge --dry-run`'
    assert settings_named(text) == {"AGENTS", "LAUNCHER", "DRAIN_SECONDS"}
    assert commands_named(text) == {("helix_recover", ("--every", "--dry-run")), ("helix_purge", ("--dry-run",))}
    assert github_anchor("What a deploy does to `live` answers") == "what-a-deploy-does-to-live-answers"
    assert github_anchor("Shape 2: several web processes on PostgreSQL + Redis") == (
        "shape-2-several-web-processes-on-postgresql--redis"
    )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_helix_setting_a_page_names_is_a_setting(page):
    assert sorted(settings_named(page.read_text()) - set(DEFAULTS)) == []


def test_the_settings_table_lists_every_setting_and_only_settings():
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    first_column = {name for row in rows for name in re.findall(r"`([A-Z_]+)`", row.split("|")[1])}
    assert sorted(first_column - set(DEFAULTS)) == []
    assert sorted(name for name in DEFAULTS if f"`{name}`" not in "\n".join(rows)) == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_a_page_names_exists_with_the_options_it_gives(page):
    commands = known_commands()
    for name, options in sorted(commands_named(page.read_text())):
        assert name in commands, f"{page_id(page)}: manage.py {name} is no command"
        if name.startswith("helix_") and options:
            parser = load_command_class("helix_django", name).create_parser("manage.py", name)
            known = {option for action in parser._actions for option in action.option_strings}
            assert sorted(set(options) - known) == [], f"{page_id(page)}: {name} {options}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_of_a_page_resolves(page):
    for target in relative_links(page.read_text()):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page_id(page)}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors_of(linked), f"{page_id(page)}: {target}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_check_id_a_page_names_is_a_check_helix_defines(page):
    source = "\n".join(path.read_text() for path in (ROOT / "helix_django").rglob("*.py"))
    defined = set(re.findall(r"""id=["'](helix_django\.[EW]\d{3})["']""", source))
    assert sorted(set(re.findall(r"helix_django\.[EW]\d{3}", page.read_text())) - defined) == []


def test_readme_stays_a_newcomers_page_whose_launcher_table_lists_every_launcher():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.split()) <= 2000
    rows = [line for line in readme.splitlines() if line.startswith("| `helix_django.runtime.launchers.")]
    listed = sorted(re.match(r"\| `helix_django\.runtime\.launchers\.(\w+)\.", row).group(1) for row in rows)
    assert listed == ["celery", "local", "tasks"]
