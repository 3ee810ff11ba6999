"""What helix's REST views render and parse, whatever the host's ``REST_FRAMEWORK`` defaults say.

Helix's wire contract is its own JSON: a host renderer of ``application/json`` (an
enveloping ``{"data": ...}`` one, a camelCase one) or a host parser list without JSON
(``FormParser``, ``MultiPartParser`` only) must not reshape or refuse it.

- :func:`renderers`: :class:`HelixJSONRenderer` first (the default for ``*/*`` and
  ``?format=json``), then the host's renderers of any other media type and format (the
  browsable API's ``text/html``); a format none of them has stays a typed 406.
- :func:`parsers`: :class:`HelixJSONParser` for ``application/json``, then the host's
  parsers of any other media type (form bodies, where the host parses them).
"""

from __future__ import annotations

from typing import Any

from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings

from helix_django.jsonbody import load_json

#: Field names a refusal may name (any other key of a body is ``*``).
BODY_FIELDS = frozenset(
    {"id", "title", "results", "toolCallId", "output", "errorText", "approved", "approvalId", "reason"}
)

JSON_MEDIA_TYPE = "application/json"


class HelixJSONRenderer(JSONRenderer):
    """DRF's JSON renderer with helix's output options, not the host's ``COMPACT_JSON`` / ``UNICODE_JSON``.

    Compact separators, UTF-8 text unescaped, ``NaN`` and infinities refused (``strict``);
    ``Content-Type: application/json``.
    """

    compact = True
    ensure_ascii = False
    strict = True


class HelixJSONParser(JSONParser):
    """DRF's JSON parser, refusing (typed 400) what cannot be stored and rendered again.

    Decodes with :func:`helix_django.jsonbody.load_json`: bytes that are not UTF-8, JSON
    nested deeper than the interpreter can parse, a lone UTF-16 surrogate (``"\\ud800"``)
    are ``cause: "json"``; a NUL in any string (PostgreSQL cannot store it) is
    ``cause: "nul_character"`` with ``field``.
    """

    media_type = JSON_MEDIA_TYPE

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        """Return the body's JSON value; raise ValidationError (400, not retryable) as above."""
        return load_json(stream.read() if stream is not None else b"", known_fields=BODY_FIELDS)


def renderers() -> list[Any]:
    """Return ``[HelixJSONRenderer(), *the host's non-JSON renderers]`` (the host's defaults as read now).

    A host renderer is left out when its ``media_type`` is ``application/json`` or its
    ``format`` is ``json``: helix's renderer answers those.
    """
    host = [
        cls()
        for cls in api_settings.DEFAULT_RENDERER_CLASSES
        if getattr(cls, "media_type", None) != JSON_MEDIA_TYPE and getattr(cls, "format", None) != "json"
    ]
    return [HelixJSONRenderer(), *host]


def parsers() -> list[Any]:
    """Return ``[HelixJSONParser(), *the host's non-JSON parsers]`` (the host's defaults as read now).

    A host parser of ``application/json`` is left out: helix's parser reads JSON bodies.
    """
    host = [cls() for cls in api_settings.DEFAULT_PARSER_CLASSES if getattr(cls, "media_type", None) != JSON_MEDIA_TYPE]
    return [HelixJSONParser(), *host]
