"""Template tags of helix_django: ``{% load helix_django %}``."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import cast
from urllib.parse import urljoin

from django import template
from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.files.storage import FileSystemStorage
from django.templatetags.static import static
from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language
from django.utils.translation.trans_real import DjangoTranslation
from django.views.i18n import JavaScriptCatalog

register = template.Library()

_STATIC_DIR = Path(__file__).resolve().parent.parent / "static" / "helix_django"


@cache
def client_modules() -> tuple[str, ...]:
    """Return the paths of the JS client's ES modules under ``static/helix_django``, sorted.

    ``*.js`` and the vendored libraries the chat page imports (``vendor/*.js``).
    """
    paths = [*_STATIC_DIR.glob("*.js"), *_STATIC_DIR.glob("vendor/*.js")]
    return tuple(sorted(path.relative_to(_STATIC_DIR).as_posix() for path in paths))


def _static_base_url() -> str:
    if apps.is_installed("django.contrib.staticfiles"):
        # Storage declares no base_url: helix reads the one FileSystemStorage (and so
        # StaticFilesStorage, ManifestStaticFilesStorage) has.
        return cast(FileSystemStorage, staticfiles_storage).base_url or "/"
    return settings.STATIC_URL or "/"


@register.simple_tag
def helix_importmap() -> SafeString:
    """Return a ``<script type="importmap">`` mapping each client module's plain URL to its stored URL.

    The modules import each other by relative path (``./sse.js``). A storage that renames
    files (``ManifestStaticFilesStorage``: ``sse.1a2b3c.js``) rewrites those imports only when
    ``support_js_module_import_aggregation`` is on; without it a hashed ``client.js`` would
    load the plain ``sse.js`` of whatever release is cached. The map sends every plain URL
    to the URL ``{% static %}`` gives, so any storage works. Empty when nothing is renamed.
    Place it before the first module script of the page.
    """
    base = _static_base_url()
    imports = {}
    for name in client_modules():
        plain = urljoin(base, f"helix_django/{name}")
        stored = static(f"helix_django/{name}")
        if stored != plain:
            imports[plain] = stored
    if not imports:
        return mark_safe("")  # noqa: S308 - a constant
    payload = json.dumps({"imports": imports}).replace("<", "\\u003c")
    return format_html('<script type="importmap">{}</script>', mark_safe(payload))  # noqa: S308 - escaped JSON


#: The id of the element {% helix_js_catalog %} writes and static/helix_django/i18n.js reads.
JS_CATALOG_ELEMENT_ID = "helix-js-catalog"


def js_catalog(language: str | None = None) -> dict[str, object]:
    """Return the JS client's translations for ``language`` (default: the active one).

    Shape of Django's ``JSONCatalog`` view, less ``formats``: ``{"catalog": {msgid: str |
    [str, ...]}, "plural": str | None}``, from the ``djangojs`` domain of helix_django's
    locale folder and the host's ``LOCALE_PATHS`` (which win), with ``LANGUAGE_CODE``'s
    catalog as the fallback, as ``JavaScriptCatalog`` builds it. ``{}`` catalog for English.
    """
    packages = ["helix_django"]
    view = JavaScriptCatalog(domain="djangojs", packages=packages)
    locale = language or get_language() or settings.LANGUAGE_CODE
    view.translation = DjangoTranslation(locale, domain="djangojs", localedirs=view.get_paths(packages))
    return {"catalog": view.get_catalog(), "plural": view.get_plural()}


@register.simple_tag
def helix_js_catalog() -> SafeString:
    """Return the JS client's catalog for the active language as ``<script type="application/json">``.

    The client's modules are ES modules behind an import map, not a script that Django's
    ``JavaScriptCatalog`` view could define globals for: they read this element (id
    ``helix-js-catalog``) on their first lookup (static/helix_django/i18n.js). Place it
    before the page's module script; without it the client speaks English.
    """
    return json_script(js_catalog(), JS_CATALOG_ELEMENT_ID)
