"""The shipped German locale is complete: every msgid in the source has a German translation.

The catalog is extracted from the source as a contributor would (``makemessages``, which
runs gettext's xgettext: scripts/services.sh installs it), in a copy of the package, for
both domains: ``django`` (Python and templates) and ``djangojs`` (the JS client). A new
string without a translation in helix_django/locale/de fails here, and so does a .po
file whose .mo was not compiled again.
"""

from __future__ import annotations

import gettext
import os
import shutil
from pathlib import Path

import polib
import pytest
from django.core.management import call_command

import helix_django
from helix_django.templatetags.helix_django import js_catalog

PACKAGE = Path(helix_django.__file__).resolve().parent
LANGUAGE = "de"
DOMAINS = ["django", "djangojs"]


def _msgkey(entry: polib.POEntry) -> str:
    """The key of ``entry`` in a compiled catalog (GNU gettext: context, EOT, msgid)."""
    return f"{entry.msgctxt}\x04{entry.msgid}" if entry.msgctxt else entry.msgid


def _shipped(domain: str) -> gettext.GNUTranslations:
    with open(PACKAGE / "locale" / LANGUAGE / "LC_MESSAGES" / f"{domain}.mo", "rb") as mo:
        return gettext.GNUTranslations(mo)


@pytest.fixture(scope="module")
def extracted(tmp_path_factory) -> dict[str, polib.POFile]:
    """Run makemessages over a copy of the package; return each domain's catalog template (.pot)."""
    root = tmp_path_factory.mktemp("extract") / "helix_django"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("locale", "__pycache__", "migrations"))
    (root / "locale").mkdir()
    previous = Path.cwd()
    try:
        os.chdir(root)  # makemessages extracts from the working directory into its locale/
        for domain in DOMAINS:
            call_command("makemessages", locale=[LANGUAGE], domain=domain, keep_pot=True, verbosity=0)
    finally:
        os.chdir(previous)
    return {domain: polib.pofile(str(root / "locale" / f"{domain}.pot")) for domain in DOMAINS}


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_source_msgid_has_a_german_translation(extracted, domain):
    template = extracted[domain]
    assert len(template) > (50 if domain == "djangojs" else 150), "makemessages found too few strings"
    catalog = _shipped(domain)._catalog  # the compiled catalog, what a pip install serves
    missing = []
    for entry in template:
        if entry.msgid_plural:
            forms = [catalog.get((_msgkey(entry), n)) for n in (0, 1)]
            if not all(forms):
                missing.append(entry.msgid)
        elif not catalog.get(_msgkey(entry)):
            missing.append(entry.msgid)
    assert missing == []


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_compiled_catalog_is_the_po_file(domain):
    po = polib.pofile(str(PACKAGE / "locale" / LANGUAGE / "LC_MESSAGES" / f"{domain}.po"))
    assert po.untranslated_entries() == []
    assert po.fuzzy_entries() == []
    catalog = _shipped(domain)._catalog
    for entry in po.translated_entries():
        if entry.msgid_plural:
            assert [catalog[(_msgkey(entry), n)] for n in (0, 1)] == [entry.msgstr_plural[0], entry.msgstr_plural[1]]
        else:
            assert catalog[_msgkey(entry)] == entry.msgstr, entry.msgid
    compiled = {key for key in catalog if key != ""}
    in_po = {(_msgkey(e), n) if e.msgid_plural else _msgkey(e) for e in po.translated_entries() for n in (0, 1)}
    assert compiled == in_po


def test_the_js_catalog_is_german_for_de_and_empty_for_english():
    german = js_catalog("de")
    assert german["catalog"]["Retry"] == "Erneut versuchen"
    assert german["catalog"]["Chat of %(date)s"] == "Chat vom %(date)s"
    assert german["plural"] == "(n != 1)"
    assert js_catalog("en") == {"catalog": {}, "plural": None}
