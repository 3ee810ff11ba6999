"""Size limits of what a run stores and sends, and their system checks (docs/limits.md).

- ``MAX_CHUNK_BYTES`` (default 1 000 000): the largest stored chunk, so the largest SSE
  frame and WebSocket message (common WebSocket clients refuse messages over 1 MiB). A
  text or reasoning delta longer than :func:`max_delta_chars` is stored as several
  deltas of the same part, which the AI SDK client concatenates (the replayed prefix
  too); a tool result is bounded by the next limit.
- ``MAX_TOOL_RESULT_BYTES`` (default 512 KiB): the largest tool result, as UTF-8 JSON. A
  server tool returning more fails its step with a typed error (the model and the
  client see ``tool-output-error``; the tool ran, so the record is ``succeeded`` with a
  ``{"error": "tool_result_too_large", "sizeBytes", "limitBytes"}`` result, never run
  again); a client submitting more gets 413 ``validation_payload_too_large``,
  ``cause: "tool_result"``.
- ``MAX_REQUEST_BYTES`` and ``MAX_REQUEST_PARTS``: the largest request body on every helix
  route (the chat and stream routes, the WebSocket, the REST API: :func:`request_too_large`
  is the one refusal, :func:`read_request_body` the REST API's bounded read, in place of
  Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``), and the most message parts in one chat body
  (:mod:`helix_django.transport.chat_body`).
- ``MAX_MESSAGE_BYTES`` (default 2 MiB): the largest stored message, as UTF-8 JSON
  ``{id, role, parts, metadata}``. A sent message over it is refused by the run-start
  commit (413 ``validation_message_too_large``, ``cause: "message"``, nothing written);
  client tool results that would grow the assistant message past it likewise
  (``cause: "tool_result"``). A run's answer is bounded by :class:`ResponseBudget`: the
  chunk that would pass the limit is neither stored nor sent, and the run fails with
  ``run_response_too_large``, its answer so far kept, marked partial.
- ``MAX_SESSION_MESSAGES`` (default 2 000): the most active messages of one session. A
  request that would add a row to a full session is refused (409 ``state_session_full``,
  nothing written); a tool-result continuation adds none. With the previous limit it
  bounds a snapshot to ``MAX_SESSION_MESSAGES * MAX_MESSAGE_BYTES``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from typing import Any

from django.core.checks import Error, Warning
from django.http import HttpRequest
from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import MessageTooLargeError, PayloadTooLargeError, ResponseTooLargeError, ValidationError

Chunk = dict[str, Any]
DELTA_TYPES = frozenset({"text-delta", "reasoning-delta"})
#: JSON bytes one character can take: a non-BMP character escaped as two ``\\u`` escapes of four hex digits.
MAX_BYTES_PER_CHAR = 12
#: Bytes of a delta chunk besides its text (type, ids, run stamps); generous.
DELTA_OVERHEAD_BYTES = 4096
#: ``(setting, smallest, largest)`` accepted by the check E020.
RANGES = (
    ("MAX_CHUNK_BYTES", 64 * 1024, 64 * 1024 * 1024),
    ("MAX_TOOL_RESULT_BYTES", 1024, 64 * 1024 * 1024),
    ("MAX_REQUEST_BYTES", 1024, 1024 * 1024 * 1024),
    ("MAX_REQUEST_PARTS", 1, 1_000_000),
    ("MAX_MESSAGE_BYTES", 64 * 1024, 1024 * 1024 * 1024),
    ("MAX_SESSION_MESSAGES", 2, 1_000_000),
)
#: Bytes of ``MAX_MESSAGE_BYTES`` a run's answer leaves for its ending (closed parts, ``helix`` metadata).
ENDING_RESERVE_BYTES = 4096
#: Chunk types that never change the response message (only the stream's framing).
_NO_GROWTH = frozenset({"finish-step", "finish", "abort", "error"})
WEBSOCKET_MESSAGE_BYTES = 1024 * 1024
"""The message size common WebSocket clients (and daphne's default) accept."""


#: Compact JSON, UTF-8 kept: one shared encoder (``json.dumps`` with options builds one per call;
#: a run calls this per delta).
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def json_size(value: Any) -> int:
    """Return the bytes of ``value`` as compact UTF-8 JSON (as the SSE frames and the stores write it)."""
    return len(_encode(value).encode("utf-8", "surrogatepass"))


def max_delta_chars() -> int:
    """Return the most characters one stored delta carries under ``MAX_CHUNK_BYTES`` (worst-case escaping)."""
    return max(1, (helix_settings.MAX_CHUNK_BYTES - DELTA_OVERHEAD_BYTES) // MAX_BYTES_PER_CHAR)


def split_delta(chunk: Chunk, max_chars: int) -> list[Chunk]:
    """Return ``chunk`` as deltas of at most ``max_chars`` characters each, in order (itself if it fits).

    Only text and reasoning deltas split: the client concatenates the deltas of one part
    id, so the message it builds is the same.
    """
    delta = chunk.get("delta")
    if chunk.get("type") not in DELTA_TYPES or not isinstance(delta, str) or len(delta) <= max_chars:
        return [chunk]
    return [{**chunk, "delta": delta[start : start + max_chars]} for start in range(0, len(delta), max_chars)]


def split_deltas(chunks: list[Chunk]) -> list[Chunk]:
    """Return ``chunks`` with every oversized delta split (see :func:`split_delta`)."""
    limit = max_delta_chars()
    return [piece for chunk in chunks for piece in split_delta(chunk, limit)]


def tool_result_too_large(result: Any) -> dict[str, Any] | None:
    """Return ``{"error": "tool_result_too_large", "sizeBytes", "limitBytes"}`` for a result too large, else None."""
    limit = helix_settings.MAX_TOOL_RESULT_BYTES
    size = json_size(result)
    return {"error": "tool_result_too_large", "sizeBytes": size, "limitBytes": limit} if size > limit else None


def check_tool_result_size(result: Any, message: Any) -> None:
    """Raise PayloadTooLargeError (413, ``cause: "tool_result"``, ``limitBytes``, ``sizeBytes``) for a result too large.

    ``message`` is the refusal's text (the REST route's and the admin's differ). The size
    rule is :func:`tool_result_too_large`'s.
    """
    too_large = tool_result_too_large(result)
    if too_large is not None:
        raise PayloadTooLargeError(
            message, cause="tool_result", limitBytes=too_large["limitBytes"], sizeBytes=too_large["sizeBytes"]
        )


def request_too_large(size_bytes: int | None, *, limit_bytes: int | None = None) -> PayloadTooLargeError:
    """Return the refusal of a request body over the limit: 413 ``validation_payload_too_large``.

    ``cause: "request_body"``, not retryable, ``limitBytes`` (``limit_bytes``, default
    ``MAX_REQUEST_BYTES``) and ``sizeBytes`` (what was declared or read so far; left out when
    unknown). Every helix route refuses an oversized body with it.
    """
    extra: dict[str, Any] = {"limitBytes": helix_settings.MAX_REQUEST_BYTES if limit_bytes is None else limit_bytes}
    if size_bytes is not None:
        extra["sizeBytes"] = size_bytes
    return PayloadTooLargeError(cause="request_body", retryable=False, **extra)


def declared_body_bytes(value: str | None) -> int | None:
    """Return a ``Content-Length`` header's value, or None when absent.

    Raises ValidationError (400, ``cause: "content_length"``) for a value that is not a
    plain decimal number.
    """
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise ValidationError(gettext_lazy("Invalid Content-Length header"), cause="content_length")
    return int(value)


def read_request_body(request: HttpRequest) -> bytes:
    """Return the body of Django ``request``, bounded by ``MAX_REQUEST_BYTES`` (not ``DATA_UPLOAD_MAX_MEMORY_SIZE``).

    A ``Content-Length`` over the limit is refused before the body is read; a body read
    past the limit is refused too (:func:`request_too_large`). The body is then preset on
    the request (``request.body`` returns it), so DRF's parsers and anything else reading
    ``request.body`` get it instead of Django's ``RequestDataTooBig``. A body some
    middleware already read (within Django's own limit) is returned as it is, bounded alike;
    a chunked body gets the ``CONTENT_LENGTH`` it was read with, so DRF parses it as the
    chat route does.
    Raises ValidationError for a malformed ``Content-Length``.
    """
    limit = helix_settings.MAX_REQUEST_BYTES
    if hasattr(request, "_body"):
        if len(request._body) > limit:
            raise request_too_large(len(request._body))
        return request._body
    declared = declared_body_bytes(request.META.get("CONTENT_LENGTH") or None)
    if declared is not None and declared > limit:
        raise request_too_large(declared)
    if getattr(request, "_read_started", False):  # a middleware consumed the stream: nothing left to bound
        return b""
    stream = request._stream  # type: ignore[attr-defined]
    if hasattr(stream, "seekable") and stream.seekable():  # ASGI: spooled whole; measure before loading it
        size = stream.seek(0, os.SEEK_END)
        stream.seek(0)
        if size > limit:
            raise request_too_large(size)
    body = request.read(limit + 1)
    if len(body) > limit:
        raise request_too_large(max(len(body), declared or 0))
    request._body = body  # what HttpRequest.body caches once read
    request._stream = io.BytesIO(body)  # type: ignore[attr-defined]
    if declared is None:  # a chunked body, read whole: DRF parses only a body of a declared length
        request.META["CONTENT_LENGTH"] = str(len(body))
    return body


def check_message_size(message: dict[str, Any], *, field: str | None = None) -> None:
    """Raise MessageTooLargeError (413, ``cause: "message"``) if ``message`` is over ``MAX_MESSAGE_BYTES``.

    ``message`` is a UIMessage as stored; its size is :func:`json_size` (C speed, linear in
    bytes, bounded by ``MAX_REQUEST_BYTES``). ``field`` names where it was sent, if known.
    """
    limit = helix_settings.MAX_MESSAGE_BYTES
    size = json_size(message)
    if size > limit:
        extra = {"field": field} if field else {}
        raise MessageTooLargeError(cause="message", limitBytes=limit, sizeBytes=size, **extra)


def chunk_growth_bytes(chunk: Chunk) -> int:
    """Return at least the bytes applying ``chunk`` adds to the response message's JSON.

    Exact for a text or reasoning delta (JSON escaping is per character); the chunk's own
    size for any other content chunk (an upper bound: the part it adds or fills holds less);
    0 for framing chunks (``finish-step``, ``helix-*``).
    """
    kind = chunk.get("type", "")
    if kind in DELTA_TYPES and isinstance(chunk.get("delta"), str):
        return json_size(chunk["delta"]) - 2
    if kind in _NO_GROWTH or kind.startswith("helix-"):
        return 0
    return json_size(chunk)


class ResponseBudget:
    """The size of a run's response message, kept as its chunks are applied (``MAX_MESSAGE_BYTES``).

    :meth:`admit` is called before each chunk is applied and sent: a delta costs its
    escaped length, so a long answer is checked in O(its bytes) overall; only when the
    estimate would pass the limit is the message measured exactly (and the estimate reset).
    The answer's limit is ``MAX_MESSAGE_BYTES - ENDING_RESERVE_BYTES``, so the ending
    (closed parts, the ``helix`` metadata) still fits.
    """

    def __init__(self, message: dict[str, Any]) -> None:
        self.limit_bytes = max(1, helix_settings.MAX_MESSAGE_BYTES - ENDING_RESERVE_BYTES)
        self.size_bytes = json_size(message)
        """Upper bound of the message's size, in bytes of UTF-8 JSON."""

    def admit(self, chunk: Chunk, message: Callable[[], dict[str, Any]]) -> None:
        """Count ``chunk`` into the message; raise ResponseTooLargeError if it would pass the limit.

        The error carries ``limitBytes`` (``MAX_MESSAGE_BYTES``), ``answerLimitBytes`` (the
        answer's share, ``limit_bytes``: what was passed) and ``sizeBytes`` (the message with
        ``chunk``, above ``answerLimitBytes``; it may be below ``limitBytes``).

        ``message`` returns the message so far; called only when the estimate would pass
        the limit (reading an accumulator's message joins its pending deltas).
        """
        growth = chunk_growth_bytes(chunk)
        if self.size_bytes + growth > self.limit_bytes:
            self.size_bytes = json_size(message())
            if self.size_bytes + growth > self.limit_bytes:
                raise ResponseTooLargeError(
                    limitBytes=helix_settings.MAX_MESSAGE_BYTES,
                    answerLimitBytes=self.limit_bytes,
                    sizeBytes=self.size_bytes + growth,
                )
        self.size_bytes += growth


def check_limits(user: dict[str, Any]) -> list[Any]:
    """Return E020 (a limit out of range), E021 (tool results not below chunks or messages), W020 (chunks > 1 MiB)."""
    messages: list[Any] = []
    values: dict[str, int] = {}
    for key, smallest, largest in RANGES:
        value = user.get(key, helix_settings.defaults[key])
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if key == "MAX_REQUEST_BYTES" and not (is_number and value > 0):
            continue  # E005 reports it
        if isinstance(value, bool) or not isinstance(value, int) or not smallest <= value <= largest:
            messages.append(
                Error(
                    f"HELIX[{key!r}] must be an integer from {smallest} to {largest}.",
                    hint="See docs/limits.md for what the limit bounds and its default.",
                    id="helix_django.E020",
                )
            )
        else:
            values[key] = value
    chunk, result = values.get("MAX_CHUNK_BYTES"), values.get("MAX_TOOL_RESULT_BYTES")
    if chunk is not None and result is not None and result > chunk - DELTA_OVERHEAD_BYTES:
        messages.append(
            Error(
                "HELIX['MAX_TOOL_RESULT_BYTES'] must be below HELIX['MAX_CHUNK_BYTES'] (minus 4096 bytes).",
                hint="A tool result is sent as one chunk: keep it at most MAX_CHUNK_BYTES - 4096.",
                id="helix_django.E021",
            )
        )
    message = values.get("MAX_MESSAGE_BYTES")
    if message is not None and result is not None and result > message - 2 * ENDING_RESERVE_BYTES:
        messages.append(
            Error(
                "HELIX['MAX_TOOL_RESULT_BYTES'] must be below HELIX['MAX_MESSAGE_BYTES'] (minus 8192 bytes).",
                hint="A tool result is stored in the assistant message: keep it at most MAX_MESSAGE_BYTES - 8192.",
                id="helix_django.E021",
            )
        )
    if chunk is not None and chunk > WEBSOCKET_MESSAGE_BYTES:
        messages.append(
            Warning(
                "HELIX['MAX_CHUNK_BYTES'] is above 1 MiB: common WebSocket clients refuse such messages.",
                hint="Keep MAX_CHUNK_BYTES at most 1 000 000 unless every client accepts larger messages.",
                id="helix_django.W020",
            )
        )
    return messages
