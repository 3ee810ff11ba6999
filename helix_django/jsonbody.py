"""Decode a JSON request body into storable data, with bounded work and typed refusals.

Every JSON body a client sends (the chat route, the WebSocket, the DRF endpoints) goes
through :func:`load_json`: strict UTF-8, ``json.loads``, then what no database can store
is refused with a non-retryable 400 ``validation_error``:

- a NUL character (``"\\u0000"``) in any string or key (PostgreSQL's ``text`` and
  ``jsonb`` refuse it): ``cause: "nul_character"`` and ``field``, the path to it;
- a lone UTF-16 surrogate (``"\\ud800"``; every later render of it would fail): ``cause: "json"``.

The costly checks run only when a C-speed scan of the text found the escape they look
for, so a clean body costs ``decode`` + ``json.loads`` + one regex scan (about 130 ms
for 8 MB here, all in C). :func:`run_off_loop` runs pure-Python validation on one
worker thread, so an event loop that serves streams only loses GIL slices to it.
This module imports nothing from DRF or Channels.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import re
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from django.utils.translation import gettext_lazy

from helix_django.errors import ValidationError

T = TypeVar("T")

#: A ``\\u0000`` or a ``\\ud800``-``\\udfff`` escape (a literal ``\\\\u0000`` also matches; the exact check decides).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
#: One worker: a flood of costly bodies queues here instead of starving the event loop of the GIL.
_VALIDATOR = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="helix-validate")


def field_path(path: Collection[Any], known_fields: Collection[str]) -> str:
    """Return ``path`` as ``"messages.3.parts.0.text"``: indexes and known field names, ``*`` for any other key.

    A client's own key is never echoed (it may be free text); ``"body"`` for the root.
    """
    parts = [str(p) if isinstance(p, int) or str(p).isdigit() or p in known_fields else "*" for p in path]
    return ".".join(parts) or "body"


def _path_to_nul(value: Any) -> list[Any] | None:
    """Return the path to the first string or key holding a NUL, or None (iterative: any depth)."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path
        elif isinstance(node, dict):
            for key, item in node.items():
                if "\x00" in key:
                    return [*path, key]
                stack.append((item, [*path, key]))
        elif isinstance(node, list):
            stack.extend((item, [*path, index]) for index, item in enumerate(node))
    return None


def ensure_storable(value: Any, text: str, *, known_fields: Collection[str] = ()) -> None:
    """Refuse parsed ``value`` (decoded from ``text``) if a database could not store it faithfully.

    Raises ValidationError (400, not retryable): ``cause: "nul_character"`` with ``field``
    for a NUL in any string or key; ``cause: "json"`` for a lone surrogate.
    """
    if _SUSPECT_ESCAPE.search(text) is None:
        return
    if "\\u0000" in text:
        path = _path_to_nul(value)
        if path is not None:
            raise ValidationError(
                gettext_lazy("Text may not contain NUL characters"),
                cause="nul_character",
                field=field_path(path, known_fields),
            )
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(gettext_lazy("Malformed JSON body"), cause="json") from exc


def load_json(raw: bytes | str, *, known_fields: Collection[str] = ()) -> Any:
    """Return the JSON value of ``raw`` (UTF-8 bytes, an optional BOM, or text), refusing what cannot be stored.

    Raises ValidationError (400, ``cause: "json"``) for bytes that are not UTF-8, text
    that is not JSON or nests deeper than the parser goes, and a lone surrogate;
    ``cause: "nul_character"`` (with ``field``) for a NUL (see :func:`ensure_storable`).
    """
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes | bytearray) else raw
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValidationError(gettext_lazy("Malformed JSON body"), cause="json") from exc
    ensure_storable(value, text, known_fields=known_fields)
    return value


async def run_off_loop(function: Callable[..., T], *args: Any) -> T:
    """Run ``function(*args)`` on the validation worker thread and return its result (or raise its error).

    For pure-Python work whose cost grows with a body (schema validation): the event
    loop keeps serving other requests meanwhile. Calls queue, one at a time.
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_VALIDATOR, functools.partial(function, *args))
