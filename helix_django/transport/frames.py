"""Stream wire frames of the raw stream route and the WebSocket (002, "createResumableStreamHandler frames").

- chunk: ``{"type": "chunk", "sequence": N, "chunk": {...}}`` (SSE: ``id: N``);
- terminal, from the stream's own status when the reader ends:
  ``ended`` -> ``{"type": "end", "status": <end status, "completed" by default>}``,
  ``paused`` -> ``{"type": "end", "status": "paused"}``,
  ``failed`` -> ``{"type": "fail", "error", "errorDetail"?, "recoverable": false}``;
- a reader that ends while the stream is still active (or gone), or whose read failed:
  ``{"type": "fail", "error", "errorDetail": {"code": "transport_stream_drop", ...}, "recoverable": true}``.

Chunks are sent without the reserved ``_run``/``_attempt``/``_step`` keys; internal
``helix-*`` chunks and the stored ``error`` chunk (carried by ``fail``) are not sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from helix_django.errors import HelixError, NotResumableError, StreamDropError
from helix_django.metrics import delivery_observer
from helix_django.protocol import RUN_KEY, to_ui_chunk
from helix_django.streams.base import ENDED, FAILED, PAUSED, StreamInfo
from helix_django.streams.reader import ResumableReader


def check_cursor(from_sequence: int, info: StreamInfo) -> None:
    """Refuse a cursor beyond the stream's head: 409 ``state_not_resumable`` (``cause: cursor_ahead``).

    The client claims sequences the stream never had (another session's, a rewound
    store): it must re-anchor on the snapshot (docs/transport.md, "Cursors").
    """
    if from_sequence > info.head_sequence:
        raise NotResumableError(cause="cursor_ahead", headSequence=info.head_sequence)


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
    if error is not None and error.code != StreamDropError.code:
        detail["cause"] = error.code
    return {"type": "fail", "error": drop.message, "errorDetail": detail, "recoverable": True}


async def stream_frames(
    reader: ResumableReader, *, route: str = "stream", marks_waits: bool = False
) -> AsyncIterator[dict[str, Any] | None]:
    """Yield the chunk frames of ``reader`` and then exactly one terminal frame.

    ``route`` labels the delivery-lag metric (``stream``, ``websocket``; :mod:`helix_django.metrics`).
    With ``marks_waits``, None is yielded each time the reader has nothing ready (before
    it may wait): the frames since the last None were ready together (the raw stream
    route sends them in one body).
    """
    observe_lag = delivery_observer(route)
    ended_runs: set[Any] = set()
    try:
        while True:
            if marks_waits and not reader.ready:
                yield None
            try:
                sequence, chunk = await anext(reader)
            except StopAsyncIteration:
                break
            if observe_lag is not None:
                observe_lag(chunk)
            run = chunk.get(RUN_KEY)
            if chunk.get("type") == "helix-run-end":
                ended_runs.add(run)
            elif run in ended_runs:
                continue  # a write of a run after its end (a fenced writer's retry): never shown
            frame = chunk_frame(sequence, chunk)
            if frame is not None:
                yield frame
    except HelixError as exc:
        yield terminal_frame(None, error=exc)
        return
    finally:
        await reader.close()
    yield terminal_frame(reader.last_info)
