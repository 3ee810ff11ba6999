"""The raw stream frames, for clients that do not speak the AI SDK: their shapes and their SSE encoding.

The raw stream route and the WebSocket send the same frames (002, "createResumableStreamHandler
frames"): ``{type: "chunk", sequence, chunk}`` for each UI chunk, then one terminal,
``{type: "end", status}`` or ``{type: "fail", error, errorDetail?, recoverable}``. Over SSE
(:func:`sse_event`) a chunk frame carries ``id: <sequence>`` and a terminal its type as the
``event:``; the WebSocket sends them as JSON text (:mod:`.wire_ws`).
"""

from __future__ import annotations

from typing import Any

from helix_django.errors import HelixError, StreamDropError
from helix_django.protocol import to_ui_chunk
from helix_django.streams.base import ENDED, FAILED, PAUSED, StreamInfo
from helix_django.transport.wire_ui import UI_STREAM_HEADERS, frame

#: Headers of the raw stream route (no UI message stream marker).
RAW_STREAM_HEADERS: list[tuple[bytes, bytes]] = [
    h for h in UI_STREAM_HEADERS if h[0] != b"x-vercel-ai-ui-message-stream"
]


def chunk_frame(sequence: int, chunk: dict[str, Any]) -> dict[str, Any] | None:
    """Return the chunk frame of a stored chunk, or None when it is not sent."""
    if chunk.get("type") == "error":
        return None
    ui = to_ui_chunk(chunk)
    if ui is None:
        return None
    return {"type": "chunk", "sequence": sequence, "chunk": ui}


def terminal_frame(info: StreamInfo | None, *, error: HelixError | None = None) -> dict[str, Any]:
    """Return the terminal frame for a reader that ended with the stream at ``info``."""
    if error is None and info is not None:
        if info.status == ENDED:
            return {"type": "end", "status": info.end_status or "completed"}
        if info.status == PAUSED:
            return {"type": "end", "status": "paused"}
        if info.status == FAILED:
            body = info.error or {}
            frame: dict[str, Any] = {"type": "fail", "error": body.get("error", "stream_failed"), "recoverable": False}
            if body.get("code"):
                frame["errorDetail"] = {k: body[k] for k in ("code", "retryable", "cause") if k in body}
            return frame
    drop = error or StreamDropError(cause="reader_ended")
    detail = {"code": StreamDropError.code, "retryable": True}
    if error is not None:
        cause = error.code if error.code != StreamDropError.code else error.cause
        if cause:
            detail["cause"] = cause
    return {"type": "fail", "error": drop.message, "errorDetail": detail, "recoverable": True}


def sse_event(item: dict[str, Any]) -> bytes:
    """Return the SSE event of a raw frame: ``id: <sequence>`` for a chunk, ``event: <type>`` for a terminal."""
    return frame(item, sequence=item["sequence"]) if item["type"] == "chunk" else frame(item, event=item["type"])
