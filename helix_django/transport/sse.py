"""SSE framing and the raw ASGI response helpers of the chat and stream routes.

Frames (002, "Wire errors", "createResumableStreamHandler frames"; aisdk-protocol §2):

- a UI chunk: ``id: <sequence>\\ndata: <json>\\n\\n`` (no ``id:`` for a chunk the route
  synthesised, such as the replayed prefix);
- an error chunk: ``event: error`` + ``data: {"type": "error", "errorText": <typed JSON body>}``;
- the terminator ``data: [DONE]``, only after a real terminal;
- heartbeats: the comment ``: keep-alive`` (first ``: stream-open``).

Every frame is sent as its own ``http.response.body`` message, which daphne writes to
the socket at once (no buffering).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import translation

from helix_django.errors import HelixError, MethodNotAllowedError, as_helix_error

logger = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]

#: The one ``Cache-Control`` of every answer of the chat and stream routes: Django's ``never_cache``
#: value (the REST views send the same), so no cache, the host's site-wide one included, keeps live state.
NEVER_CACHE = (b"cache-control", b"max-age=0, no-cache, no-store, must-revalidate, private")

#: The UI message stream response headers (``UI_MESSAGE_STREAM_HEADERS`` of the AI SDK, never cached).
UI_STREAM_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    NEVER_CACHE,
    (b"connection", b"keep-alive"),
    (b"x-vercel-ai-ui-message-stream", b"v1"),
    (b"x-accel-buffering", b"no"),
]
#: Headers of the raw stream route (no UI message stream marker).
RAW_STREAM_HEADERS: list[tuple[bytes, bytes]] = [
    h for h in UI_STREAM_HEADERS if h[0] != b"x-vercel-ai-ui-message-stream"
]

STREAM_OPEN = b": stream-open\n\n"
KEEP_ALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"


def dumps(value: Any) -> str:
    """Compact JSON (UTF-8 kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def frame(data: Any, *, sequence: int | None = None, event: str | None = None) -> bytes:
    """Return one SSE event holding ``data`` as JSON, with ``id: sequence`` when given."""
    lines = []
    if event:
        lines.append(f"event: {event}")
    if sequence is not None:
        lines.append(f"id: {sequence}")
    lines.append(f"data: {dumps(data)}")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def error_chunk(body: dict[str, Any]) -> dict[str, Any]:
    """Return the UI ``error`` chunk whose ``errorText`` is the typed JSON body."""
    return {"type": "error", "errorText": dumps(body)}


def error_frame(body: dict[str, Any], *, sequence: int | None = None) -> bytes:
    """Return the SSE frame of an ``error`` chunk carrying ``body``."""
    return frame(error_chunk(body), sequence=sequence, event="error")


async def send_json(
    send: Send,
    status: int,
    body: Any,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send a complete JSON response."""
    payload = dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                NEVER_CACHE,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def rendering_language(language: str | None) -> contextlib.AbstractContextManager[None]:
    """Return a context rendering messages in ``language`` (the request's); None: the active language."""
    return translation.override(language) if language else contextlib.nullcontext()


async def send_error(
    send: Send,
    exc: BaseException,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    language: str | None = None,
) -> None:
    """Send the typed error response of ``exc`` (an untyped error becomes ``framework_internal_error``).

    The message is rendered in ``language``: the request's, as the host's middleware
    activated it (:attr:`helix_django.transport.host.HostAnswer.language`), whenever the
    error was made. A retryable 503 carries ``Retry-After: 1`` (002, "The run-start
    window"); a 429 the throttle's wait.
    """
    error = as_helix_error(exc)
    with rendering_language(language):
        body = error.to_body()
    extra = list(headers or [])
    if isinstance(error, MethodNotAllowedError) and error.allowed:
        extra.append((b"allow", ", ".join(error.allowed).encode()))
    if error.status == 401 and error.www_authenticate:
        extra.append((b"www-authenticate", error.www_authenticate.encode("latin-1")))
    if error.status == 503 and error.is_retryable:
        extra.append((b"retry-after", b"1"))
    elif error.status == 429:
        wait = error.extra.get("retryAfterSeconds") or 1
        extra.append((b"retry-after", str(math.ceil(wait)).encode()))
    await send_json(send, error.status, body, headers=extra)


async def send_empty(send: Send, status: int = 204, *, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a response without a body (``204``: nothing to resume), never cached."""
    await send({"type": "http.response.start", "status": status, "headers": [NEVER_CACHE, *(headers or [])]})
    await send({"type": "http.response.body", "body": b""})


def log_unexpected(where: str, exc: BaseException) -> None:
    """Log an untyped failure by type and place only (never its text: it may hold prompt or tool data).

    A configuration error (``ImproperlyConfigured``) is the site's own text, never user data:
    its message is logged, so the operator sees what to fix.
    """
    if not isinstance(exc, HelixError):
        frames = traceback.extract_tb(exc.__traceback__)
        at = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        if isinstance(exc, ImproperlyConfigured):
            logger.error("%s failed: %s at %s: %s", where, type(exc).__name__, at, exc)
        else:
            logger.error("%s failed: %s at %s", where, type(exc).__name__, at)
