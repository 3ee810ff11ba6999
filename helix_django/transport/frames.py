"""Stream wire frames of the raw stream route and the WebSocket (002, "createResumableStreamHandler frames").

- chunk: ``{"type": "chunk", "sequence": N, "chunk": {...}}`` (SSE: ``id: N``);
- terminal, from the stream's own status when the reader ends:
  ``ended`` -> ``{"type": "end", "status": <end status, "completed" by default>}``,
  ``paused`` by the run's own ``suspended`` end (it waits for the browser) ->
  ``{"type": "end", "status": "paused"}``,
  ``failed`` -> ``{"type": "fail", "error", "errorDetail"?, "recoverable": false}``;
- a reader that ends while the stream is still active (or gone), or whose read failed:
  ``{"type": "fail", "error", "errorDetail": {"code": "transport_stream_drop", ...}, "recoverable": true}``;
  so does one whose stream a recovery paused to fence the run's writer (recovery/scan.py,
  ``fence_writer``; ``"cause": "run_recovering"``): the run is still live and the client
  resumes from its cursor (:func:`is_paused_by_its_run`, the chat route's rule too).

Chunks are sent without the reserved ``_run``/``_attempt``/``_step`` keys; internal
``helix-*`` chunks and the stored ``error`` chunk (carried by ``fail``) are not sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from helix_django.errors import HelixError, NotResumableError, StreamDropError, StreamNotFoundError
from helix_django.metrics import delivery_observer
from helix_django.orm import sync_to_async
from helix_django.protocol import RUN_KEY
from helix_django.store.reads import has_runs, live_run_ids
from helix_django.streams.base import PAUSED, BaseStreamManager, StreamInfo
from helix_django.streams.reader import ResumableReader
from helix_django.transport.planner import cursor_ahead, recovering_drop
from helix_django.transport.wire_raw import chunk_frame, terminal_frame

SUSPENDED_END = "suspended"
"""The ``helix-run-end`` status a run writes before it pauses its stream to wait for the browser."""


FENCE_WAIT_SECONDS = 5.0
"""How long a reader whose stream a recovery fenced waits for that recovery's outcome before the drop."""


async def is_paused_by_its_run(manager: BaseStreamManager, info: StreamInfo, run_ends: Mapping[Any, str]) -> bool:
    """Whether the paused stream at ``info`` was paused by the run holding it, after its ``suspended`` end.

    A run that waits for the browser writes ``helix-run-end`` ``suspended`` and then pauses
    its stream; a recovery pauses it with no chunk to fence the run's writer, which is still
    live (recovery/fences.py, ``fence_writer``). Only the first is a reader's clean end.
    ``run_ends``: the ``helix-run-end`` status of each run id whose end the reader passed.
    When the reader passed none of the holding run (its cursor was at or past that end),
    the stream's last chunk is read (one read, for a paused stream only). False for a
    stream that is not paused, and when that read fails (the reader's end is then a drop:
    the client comes back). The chat route's filter applies the same rule: ``[DONE]``
    only after the followed run's ``suspended`` end.
    """
    if info.status != PAUSED:
        return False
    status = run_ends.get(info.run_id)
    if status is None and info.head_sequence > 0:
        try:
            last = await manager.read_all(info.stream_id, after=info.head_sequence - 1)
        except HelixError:
            return False
        if last and last[-1][1].get(RUN_KEY) == info.run_id and last[-1][1].get("type") == "helix-run-end":
            status = last[-1][1].get("status")
    return status == SUSPENDED_END


async def reader_after_fence(reader: ResumableReader) -> ResumableReader | None:
    """Return a reader from ``reader``'s cursor once the recovery that fenced its stream decided, else None.

    A recovery pauses the run's stream to fence its writer, then ends the run (*Mark
    interrupted*, *Check status*, the periodic scan: interrupted, completed from the
    provider, cancelled) and closes the stream with that ending (recovery/outcomes.py).
    A live reader that ended at the fence waits for that (event-driven, the manager's
    wake-ups, at most :data:`FENCE_WAIT_SECONDS`) and follows the stream on from its
    cursor, so it tells the run's real ending (docs/transport.md, "Endings": a live
    reader and a backlog replay alike). None when the stream is still paused at the same
    head and epoch after the wait (the caller's drop, ``cause: run_recovering``) or is
    gone. Raises StreamConnectionError for a failed read. ``reader`` must be closed.
    """
    manager, stream_id, fenced = reader.manager, reader.stream_id, reader.last_info
    if fenced is None:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FENCE_WAIT_SECONDS
    while True:
        waiter = manager.subscribe(stream_id)
        try:
            info = await manager.get_info(stream_id)
            if info is None:
                return None
            if (info.status, info.epoch, info.head_sequence) != (PAUSED, fenced.epoch, fenced.head_sequence):
                return ResumableReader(
                    manager, stream_id, from_sequence=reader.current_sequence, wait_for_live=False, info=info
                )
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await waiter.wait(remaining)
        finally:
            waiter.cancel()


#: :func:`reader_past_its_end`: the reader ended at the stream's own end (not at a recovery's fence).
ENDED_FOR_GOOD = "ended"
#: :func:`reader_past_its_end`: a recovery's fence still stands after the wait (a retryable drop).
STILL_FENCED = "fenced"


async def reader_past_its_end(reader: ResumableReader, run_ends: Mapping[Any, str]) -> ResumableReader | str:
    """Return the reader to go on with once ``reader`` ended, or why there is none.

    :data:`ENDED_FOR_GOOD` where the stream is not paused, or was paused by its run after
    its ``suspended`` end (:func:`is_paused_by_its_run`, ``run_ends`` as there); at a
    recovery's fence ``reader`` is closed and the stream followed to the ending the
    recovery decides (:func:`reader_after_fence`): that reader, or :data:`STILL_FENCED`
    where the fence still stands after the wait. Raises StreamConnectionError for a failed read.
    """
    info = reader.last_info
    if info is None or info.status != PAUSED or await is_paused_by_its_run(reader.manager, info, run_ends):
        return ENDED_FOR_GOOD
    await reader.close()
    follow = await reader_after_fence(reader)
    return STILL_FENCED if follow is None else follow


def check_cursor(from_sequence: int, info: StreamInfo) -> None:
    """Refuse a cursor beyond the stream's head: 409 ``state_not_resumable`` (``cause: cursor_ahead``).

    The client claims sequences the stream never had (another session's, a rewound
    store): it must re-anchor on the snapshot (docs/transport.md, "Cursors").
    """
    error = cursor_ahead(from_sequence, info)
    if error is not None:
        raise error


def is_purged(info: StreamInfo) -> bool:
    """Whether the stream's chunks were purged (retention, a deleted session): it is left with no run."""
    return not info.run_id


async def missing_stream_error(session_id: str) -> HelixError:
    """Return the refusal of a stream read of an owned session ``session_id`` that found no stream to read.

    Every route tells the same thing, for a stream that is missing or :func:`is_purged`:

    - a live run whose stream claim has not landed yet (the claim follows the run-start
      commit, on the process that runs it): 503 ``transport_stream_drop``
      (``cause: "stream_opening"``), retryable, the client comes back from its cursor;
    - a session whose runs wrote a stream that is gone (expired, or its chunks purged by
      retention): 409 ``state_not_resumable`` (``cause: "stream_expired"``), as the chat
      route answers (002, "Wire errors"): the snapshot still holds the conversation;
    - a session no run ever wrote to: 404 ``stream_not_found`` (002).

    One or two reads of the session's runs, on this rare path only.
    """
    if await sync_to_async(live_run_ids)(session_id):
        return StreamDropError(cause="stream_opening")
    if await sync_to_async(has_runs)(session_id):
        return NotResumableError(cause="stream_expired")
    return StreamNotFoundError()


def _is_after_its_runs_end(chunk: dict[str, Any], run_ends: dict[Any, str]) -> bool:
    """Whether ``chunk`` is a write of a run after that run's end (never shown); records each run's end.

    A write after the end is a fenced writer's retry. The resync of a run recovery ended
    again (*Check status* completed it) is told: the answer is in the snapshot. The run's
    last end decides (a recovery may end it again).
    """
    run = chunk.get(RUN_KEY)
    if chunk.get("type") == "helix-run-end":
        run_ends[run] = str(chunk.get("status", ""))
        return False
    return run in run_ends and chunk.get("type") != "data-stream-resync"


async def stream_frames(
    reader: ResumableReader, *, route: str = "stream", marks_waits: bool = False
) -> AsyncIterator[dict[str, Any] | None]:
    """Yield the chunk frames of ``reader`` and then exactly one terminal frame.

    The terminal is told from the stream's status when the reader ended, except a pause:
    ``end paused`` only when the run holding the stream wrote its ``suspended`` end
    (:func:`is_paused_by_its_run`); at a recovery's fence the reader follows the stream
    to the ending the recovery decides (:func:`reader_after_fence`), and only a fence
    still standing after the wait is a retryable drop (``cause: run_recovering``), for
    the raw stream route and the WebSocket alike.
    ``route`` labels the delivery-lag metric (``stream``, ``websocket``; :mod:`helix_django.metrics`).
    With ``marks_waits``, None is yielded each time the reader has nothing ready (before
    it may wait): the frames since the last None were ready together (the raw stream
    route sends them in one body).
    """
    observe_lag = delivery_observer(route)
    run_ends: dict[Any, str] = {}
    """The last ``helix-run-end`` status of each run whose end was read."""
    try:
        while True:
            if marks_waits and not reader.ready:
                yield None
            try:
                sequence, chunk = await anext(reader)
            except StopAsyncIteration:
                follow = await reader_past_its_end(reader, run_ends)
                if follow == STILL_FENCED:
                    yield terminal_frame(None, error=recovering_drop())
                    return
                if isinstance(follow, str):
                    break
                reader = follow  # past a recovery's fence: on to the ending it decided
                continue
            if observe_lag is not None:
                observe_lag(chunk)
            if _is_after_its_runs_end(chunk, run_ends):
                continue
            frame = chunk_frame(sequence, chunk)
            if frame is not None:
                yield frame
    except HelixError as exc:
        yield terminal_frame(None, error=exc)
        return
    finally:
        await reader.close()
    yield terminal_frame(reader.last_info)
