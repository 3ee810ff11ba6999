"""The AI SDK UI message stream over SSE: the chat route's one frame encoder (aisdk-protocol §2).

Frames (002, "Wire errors"):

- a UI chunk: ``id: <sequence>\\ndata: <json>\\n\\n`` (no ``id:`` for a chunk the route
  synthesised, such as the replayed prefix);
- an error chunk: ``event: error`` + ``data: {"type": "error", "errorText": <typed JSON body>}``;
- the terminator ``data: [DONE]``, only after a real terminal;
- heartbeats: the comment ``: keep-alive`` (first ``: stream-open``).

Every frame is sent as its own ``http.response.body`` message, which daphne writes to
the socket at once (no buffering).
"""

from __future__ import annotations

from typing import Any

from helix_django.shared_chunks import UIChunk, encode_ui

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

STREAM_OPEN = b": stream-open\n\n"
KEEP_ALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"


def dumps(value: Any) -> str:
    """Compact JSON (UTF-8 kept as is)."""
    return encode_ui(value)


def frame(data: Any, *, sequence: int | None = None, event: str | None = None) -> bytes:
    """Return one SSE event holding ``data`` as JSON, with ``id: sequence`` when given.

    A :class:`~helix_django.shared_chunks.UIChunk` brings its JSON, encoded once for every response.
    """
    if event is None and sequence is not None:
        text = data.json if type(data) is UIChunk else encode_ui(data)
        return f"id: {sequence}\ndata: {text}\n\n".encode()
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


def error_ui_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """Return the UI ``error`` chunk of a stored ``error`` chunk: ``errorText`` = the typed JSON body."""
    body = chunk.get("helixError")
    if not isinstance(body, dict):
        body = {"error": "stream_failed", "code": "stream_failed", "retryable": False}
    return {"type": "error", "errorText": dumps(body)}
