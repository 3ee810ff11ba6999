"""Plan a resume of the chat route (002, "How handleChatStream resumes", "The run-start window", C-1).

- No run: ``204``.
- Replay prefix (``X-Helix-Replay-Prefix: 1`` + ``X-Existing-Message-Id``): the
  message's committed parts from one snapshot, then the tail after that snapshot's cursor
  (never below the run's start); an id the snapshot does not hold (unless it is the live
  run's own uncommitted response) is 409 ``state_not_resumable`` / ``resume_message_unknown``.
- No cursor: a live run is replayed from its start (beginning with ``start {messageId}``);
  a run that continues an earlier message is replayed as that message's committed prefix
  plus the tail, so a client that resets the message on ``start`` rebuilds all of it. A
  finished run: ``204``.
- A cursor: clamped to the current run's start (a stale cursor of an earlier turn replays
  the current run, 002), then the chunks after it and the run's terminal. At the head of
  a finished run: ``204`` (the client holds everything). Beyond the stream's head: 409
  ``state_not_resumable`` / ``cursor_ahead``; a finished run whose stream expired or was
  purged: 409 ``state_not_resumable`` / ``stream_expired`` (load the snapshot); a failed
  stream: 409 ``stream_failed``. The whole table, with its tests: docs/transport.md, "Cursors".
- The run-start window: wait until the run claims the stream, bounded by
  ``LIVE_WAIT_TIMEOUT_MS``, then 503 ``transport_stream_drop`` / ``run_not_live``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import (
    HelixError,
    NotResumableError,
    SessionNotFoundError,
    StreamDropError,
    StreamFailedError,
)
from helix_django.models import Run, RunStatus
from helix_django.orm import sync_to_async
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from helix_django.streams.base import ACTIVE, ENDED, FAILED, PAUSED, BaseStreamManager, StoredChunk, StreamInfo
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.frames import check_cursor, recovering_drop
from helix_django.transport.plan import ResponsePlan, plan_from_chunks, read_plan
from helix_django.transport.plan_reads import PAGE_CHUNKS
from helix_django.transport.prefix import prefix_chunks
from helix_django.transport.replay import ResponseFilter, tool_call_ids
from helix_django.transport.resume_reads import ResumeState, read_resume_state

#: Run kinds whose response message existed before the run (it continues that message).
CONTINUATION_KINDS = frozenset({"tool_result", "continue"})
_MAX_REPLANS = 3


class StreamFailedResponse(StreamFailedError):
    """409 ``stream_failed`` with the reference's body (002, "Wire errors", chat resume)."""

    def __init__(self, *, session_id: str, stream_id: str, error: dict[str, Any] | None) -> None:
        super().__init__("stream_failed")
        self.session_id, self.stream_id, self.error_body = session_id, stream_id, error or {}

    def to_body(self) -> dict[str, Any]:
        """Return ``{error: 'stream_failed', code, retryable, sessionId, streamId, message, errorDetail?}``."""
        body: dict[str, Any] = {
            "error": "stream_failed",
            "code": self.error_body.get("code") or "stream_failed",
            "retryable": bool(self.error_body.get("retryable", False)),
            "sessionId": self.session_id,
            "streamId": self.stream_id,
            "message": str(gettext_lazy("The stream failed")),
        }
        if self.error_body.get("code"):
            body["errorDetail"] = {
                k: self.error_body[k] for k in ("code", "retryable", "cause") if k in self.error_body
            }
        return body


@dataclasses.dataclass
class LiveRead:
    """The first read of a live run's stream: its info, the chunks after the cursor, the waiter."""

    info: StreamInfo
    """The stream's info, claimed by the run (read atomically with ``chunks``)."""
    chunks: list[StoredChunk]
    """The first page of chunks after the read's ``after`` (at most ``PAGE_CHUNKS``; the plan reads on)."""
    waiter: Any
    """Subscribed before the read: the response's reader keeps it (or cancel it)."""


async def wait_until_live(manager: BaseStreamManager, stream_id: str, run: Run, *, after: int) -> LiveRead | None:
    """Wait until ``run`` holds the stream's claim; return the stream read after ``after``, or None if the run ended.

    One read serves the liveness check and the backlog's first page: the stream's chunks
    after ``after`` and its info come back together (``read_after``; the plan reads the
    rest a page at a time, :mod:`.plan_reads`). Event-driven: parks on the
    manager's wake-ups; the only timer is ``LIVE_WAIT_TIMEOUT_MS``, after which
    StreamDropError (``cause: run_not_live``, 503, ``Retry-After: 1``) is raised.
    Releasing a waiter twice (the wait's own release, then the ``finally``) is harmless:
    ``Waiter.cancel()`` drops the process's cross-process listen count once per waiter.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + helix_settings.LIVE_WAIT_TIMEOUT_MS / 1000
    while True:
        waiter = manager.subscribe(stream_id)
        handed = False
        try:
            chunks, info = await manager.read_after(stream_id, after, limit=PAGE_CHUNKS)
            if info is not None and info.run_id == run.id:
                handed = True
                return LiveRead(info=info, chunks=chunks, waiter=waiter)
            fresh = await Run.objects.filter(pk=run.id).afirst()
            if fresh is None or not fresh.is_live:
                return None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise StreamDropError(gettext_lazy("The run did not go live in time"), cause="run_not_live")
            await waiter.wait(remaining)
        finally:
            if not handed:
                waiter.cancel()


#: How long a resume waits for the stream end of a run already ended in the database (seconds).
ENDING_WAIT_SECONDS = 5.0


async def wait_for_stream_end(manager: BaseStreamManager, stream_id: str) -> StreamInfo | None:
    """Return the info of the stream once it is no longer ``active``/``paused`` (or after ``ENDING_WAIT_SECONDS``).

    A run ended elsewhere (a Stop served by another process, a recovery: recovery/outcomes.py)
    commits its terminal status before its stream's closing chunks are appended: a resume in
    between, its cursor at the head, was answered 204 (the client holds everything) and never
    saw the ending (``abort`` + ``[DONE]``). Event-driven (the manager's wake-ups); a stream
    still open after the wait (its close failed: the backend was down) is answered
    from what it holds (the snapshot tells the run's status). Raises StreamConnectionError
    for a failed read.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ENDING_WAIT_SECONDS
    while True:
        waiter = manager.subscribe(stream_id)
        try:
            info = await manager.get_info(stream_id)
            remaining = deadline - loop.time()
            if info is None or info.status not in (ACTIVE, PAUSED) or remaining <= 0:
                return info
            await waiter.wait(remaining)
        finally:
            waiter.cancel()


async def plan_prefix(state: ResumeState, message_id: str) -> ResponsePlan:
    """Plan a C-1 replay: ``message_id``'s committed parts, then the tail after the same snapshot's cursor.

    Raises NotResumableError (``resume_message_unknown``), HistoryIncompleteError (the
    prefix read failed: 503 retryable / 409) or StreamDropError (``run_not_live``).
    """
    session, run = state.session, state.run
    snapshot = await abuild_snapshot(session.id)
    if snapshot is None:
        raise SessionNotFoundError()
    message = next((m for m in snapshot["messages"] if m.get("id") == message_id), None)
    is_live_response = run is not None and run.is_live and run.response_message_id == message_id
    if message is None and not is_live_response:
        raise NotResumableError(cause="resume_message_unknown")
    prefix = prefix_chunks(message, message_id)
    if run is None or run.response_message_id != message_id:
        # Committed history no live run writes: it ends as the run that wrote it ended, never as
        # the session's current run (a later turn's failure or liveness is not this message's).
        writer = await _writer_of(message, session.id)
        return ResponsePlan(prefix=prefix, run=writer, filter=ResponseFilter(run_id=None))
    manager = get_stream_manager()
    tail_from = max(snapshot["streamSequence"], run.start_sequence)
    response_filter = ResponseFilter(
        run_id=run.id,
        owned_tool_call_ids=tool_call_ids(message),
        dedupe_start_for=message_id,
        tool_names=state.tool_names,
    )
    live = await wait_until_live(manager, session.stream_id, run, after=run.start_sequence) if run.is_live else None
    if live is None:
        return await read_plan(
            manager, session.stream_id, run=run, from_sequence=tail_from, response_filter=response_filter, prefix=prefix
        )
    return await plan_from_chunks(
        manager,
        session.stream_id,
        (live.chunks, live.info),
        run=run,
        from_sequence=tail_from,
        response_filter=response_filter,
        live=live.info,
        prefix=prefix,
        subscribed=live.waiter,
    )


async def _writer_of(message: dict[str, Any] | None, session_id: str) -> Run | None:
    """Return the ended run that last wrote ``message`` (its ``metadata.helix.runId``), or None."""
    helix = ((message or {}).get("metadata") or {}).get("helix")
    run_id = helix.get("runId") if isinstance(helix, dict) else None
    if not isinstance(run_id, str) or not run_id:
        return None
    return await Run.objects.filter(pk=run_id, session_id=session_id).afirst()


async def plan_resume(request: ChatRequest, state: ResumeState, _depth: int = 0) -> ResponsePlan:
    """Plan the response to a resume (see the module docstring) from the state read with its authentication."""
    session, run = state.session, state.run
    if request.replay_prefix and request.existing_message_id:
        return await plan_prefix(state, request.existing_message_id)
    if run is None:
        return ResponsePlan.nothing()
    manager = get_stream_manager()
    stream_id = session.stream_id
    if run.is_live:
        if request.cursor is None and run.kind in CONTINUATION_KINDS:
            return await plan_prefix(state, run.response_message_id)
        live = await wait_until_live(manager, stream_id, run, after=run.start_sequence)
        if live is None:  # the run ended while we waited: decide again from what it left
            if _depth >= _MAX_REPLANS:
                raise StreamDropError(cause="run_not_live")
            fresh = await sync_to_async(read_resume_state)(session.id, None)
            return await plan_resume(request, fresh, _depth + 1)
        try:
            if live.info.status == PAUSED and run.status != RunStatus.SUSPENDED_CLIENT_TOOL:
                # Paused but not waiting for the browser: a recovery fenced the run's writer and is
                # deciding its ending (recovery/scan.py, fence_writer). Ask the client to come back.
                raise recovering_drop()
            if request.cursor is not None:
                check_cursor(request.cursor, live.info)
        except HelixError:
            live.waiter.cancel()
            raise
        cursor = run.start_sequence if request.cursor is None else max(request.cursor, run.start_sequence)
        plan = await plan_from_chunks(
            manager,
            stream_id,
            (live.chunks, live.info),
            run=run,
            from_sequence=cursor,
            live=live.info,
            response_filter=_resume_filter(request, state, cursor if request.cursor is not None else None),
            subscribed=live.waiter,
        )
        if live.info.status != ACTIVE and not plan.has_visible_backlog:
            await plan.close()
            if live.info.status == PAUSED or _depth >= _MAX_REPLANS:
                return ResponsePlan.nothing()  # paused, and nothing after the cursor
            # Ended since the run was read as live (a Stop served elsewhere): decide from the ended run.
            fresh = await sync_to_async(read_resume_state)(session.id, None)
            return await plan_resume(request, fresh, _depth + 1)
        return plan
    if request.cursor is None:
        return ResponsePlan.nothing()
    info = await manager.get_info(stream_id)
    if run.is_terminal and info is not None and info.run_id == run.id and info.status in (ACTIVE, PAUSED):
        info = await wait_for_stream_end(manager, stream_id)
    if info is None or not info.run_id:  # expired (TTL) or purged: the snapshot still has the conversation
        raise NotResumableError(cause="stream_expired")
    check_cursor(request.cursor, info)
    cursor = max(request.cursor, run.start_sequence)
    at_head = cursor >= info.head_sequence
    if info.run_id != run.id or (at_head and info.status != ENDED):
        return ResponsePlan.nothing()  # the run wrote nothing to the stream, or the client holds all of it
    if info.status == FAILED:
        raise StreamFailedResponse(session_id=session.id, stream_id=stream_id, error=info.error)
    response_filter = _resume_filter(request, state, cursor)
    plan = await read_plan(
        manager, stream_id, run=run, from_sequence=cursor, live=None, response_filter=response_filter
    )
    if at_head:
        # The client read every chunk: it holds the ending too if the run's own end is among them;
        # a stream ended without it (the run's task ended it after a fence, its canceller's close
        # refused) is told from the run (``abort`` + ``[DONE]`` for a cancelled one), never a 204.
        return ResponsePlan.nothing() if response_filter.last_end_at is not None else plan
    return plan if plan.has_visible_backlog else ResponsePlan.nothing()


def _resume_filter(request: ChatRequest, state: ResumeState, cursor: int | None) -> ResponseFilter:
    """The filter of a resume without prefix: the client holds the message it resumes into."""
    run = state.run
    assert run is not None  # a resume plans only for a session with a run
    owned: list[str] = []
    if cursor is not None:
        owned = state.held_tool_call_ids(request.existing_message_id or run.response_message_id)
    return ResponseFilter(run_id=run.id, owned_tool_call_ids=owned, cursor=cursor, tool_names=state.tool_names)
