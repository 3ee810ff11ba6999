"""The plain ASGI responses of the chat and stream routes: typed JSON refusals, empty answers, logging.

The streamed bodies are encoded per wire: :mod:`.wire_ui` (the AI SDK UI message stream),
:mod:`.wire_raw` (the raw stream route's frames), :mod:`.wire_ws` (the WebSocket's).
"""

from __future__ import annotations

import contextlib
import logging
import math
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils import translation

from helix_django.errors import HelixError, MethodNotAllowedError, as_helix_error
from helix_django.transport.wire_ui import NEVER_CACHE, dumps

logger = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]


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
