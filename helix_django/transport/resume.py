"""The reads and waits of a chat-route resume; its decisions are :mod:`helix_django.transport.planner`'s.

:func:`plan_resume` asks the planner what to do with the request and the session's run,
reads what it asks for (the stream's info, a live run's first page once it holds the
claim, the C-1 snapshot) and hands the result back to it; the answer is a
:class:`~helix_django.transport.plan.ResponsePlan` the route streams. The waits:

- the run-start window: wait until the run claims the stream, bounded by
  ``LIVE_WAIT_TIMEOUT_MS``, then 503 ``transport_stream_drop`` / ``run_not_live``;
- a run ended in the database whose stream is still open: wait for its close
  (``ENDING_WAIT_SECONDS``).

The whole table, with its tests: docs/transport.md, "Cursors".
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from django.utils.translation import gettext_lazy

from helix_django.conf import helix_settings
from helix_django.errors import (
    NotResumableError,
    SessionNotFoundError,
    StreamDropError,
)
from helix_django.models import Run
from helix_django.orm import sync_to_async
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from helix_django.streams.base import ACTIVE, PAUSED, BaseStreamManager, StoredChunk, StreamInfo
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.plan import ResponsePlan, plan_from_chunks, read_plan
from helix_django.transport.plan_reads import PAGE_CHUNKS
from helix_django.transport.planner import (
    Path,
    ResumeAsk,
    RunFacts,
    ended_replay_sends,
    live_replay_is_empty,
    plan_ended,
    plan_live,
    plan_start,
)
from helix_django.transport.prefix import prefix_chunks
from helix_django.transport.replay import ResponseFilter, tool_call_ids
from helix_django.transport.resume_reads import ResumeState, read_resume_state

_MAX_REPLANS = 3


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
    """Plan the response to a resume (see the module docstring) from the state read with its authentication.

    The decisions are :mod:`helix_django.transport.planner`'s; this function does their reads
    and waits. Raises the planner's typed refusals.
    """
    ask = ResumeAsk.of(request)
    run = state.run
    facts = None if run is None else RunFacts.of(run)
    decided = plan_start(ask, facts)
    if decided.path is Path.PREFIX:
        assert decided.message_id is not None
        return await plan_prefix(state, decided.message_id)
    if run is None or facts is None or decided.path is Path.NOTHING:
        return ResponsePlan.nothing()
    if decided.path is Path.WAIT_LIVE:
        return await _plan_live(request, state, run, facts, _depth)
    return await _plan_ended(request, state, run, facts)


async def _replan(request: ChatRequest, state: ResumeState, depth: int) -> ResponsePlan:
    """Plan again from a fresh read of the session: its run ended while this resume was planned."""
    fresh = await sync_to_async(read_resume_state)(state.session.id, None)
    return await plan_resume(request, fresh, depth + 1)


async def _plan_live(request: ChatRequest, state: ResumeState, run: Run, facts: RunFacts, depth: int) -> ResponsePlan:
    """Wait until the live ``run`` holds the stream, then read the replay :func:`planner.plan_live` decides."""
    manager = get_stream_manager()
    stream_id = state.session.stream_id
    live = await wait_until_live(manager, stream_id, run, after=run.start_sequence)
    if live is None:  # the run ended while we waited: decide again from what it left
        if depth >= _MAX_REPLANS:
            raise StreamDropError(cause="run_not_live")
        return await _replan(request, state, depth)
    decided = plan_live(ResumeAsk.of(request), facts, live.info)
    if decided.error is not None:
        live.waiter.cancel()
        raise decided.error
    assert decided.from_sequence is not None
    plan = await plan_from_chunks(
        manager,
        stream_id,
        (live.chunks, live.info),
        run=run,
        from_sequence=decided.from_sequence,
        live=live.info,
        response_filter=_resume_filter(request, state, decided.cursor),
        subscribed=live.waiter,
    )
    if live_replay_is_empty(live.info, has_visible_backlog=plan.has_visible_backlog):
        await plan.close()
        if live.info.status == PAUSED or depth >= _MAX_REPLANS:
            return ResponsePlan.nothing()  # paused, and nothing after the cursor
        # Ended since the run was read as live (a Stop served elsewhere): decide from the ended run.
        return await _replan(request, state, depth)
    return plan


async def _plan_ended(request: ChatRequest, state: ResumeState, run: Run, facts: RunFacts) -> ResponsePlan:
    """Read the finished ``run``'s stream info, then the replay :func:`planner.plan_ended` decides."""
    manager = get_stream_manager()
    session_id, stream_id = state.session.id, state.session.stream_id
    ask = ResumeAsk.of(request)
    info = await manager.get_info(stream_id)
    decided = plan_ended(ask, facts, info, session_id=session_id, stream_id=stream_id)
    if decided.path is Path.WAIT_END:
        info = await wait_for_stream_end(manager, stream_id)
        decided = plan_ended(ask, facts, info, session_id=session_id, stream_id=stream_id, waited=True)
    if decided.error is not None:
        raise decided.error
    if decided.path is Path.NOTHING:
        return ResponsePlan.nothing()
    assert decided.from_sequence is not None
    response_filter = _resume_filter(request, state, decided.cursor)
    plan = await read_plan(
        manager, stream_id, run=run, from_sequence=decided.from_sequence, live=None, response_filter=response_filter
    )
    holds_run_end = response_filter.last_end_at is not None
    if ended_replay_sends(decided, has_visible_backlog=plan.has_visible_backlog, holds_run_end=holds_run_end):
        return plan
    return ResponsePlan.nothing()


def _resume_filter(request: ChatRequest, state: ResumeState, cursor: int | None) -> ResponseFilter:
    """The filter of a resume without prefix: the client holds the message it resumes into."""
    run = state.run
    assert run is not None  # a resume plans only for a session with a run
    owned: list[str] = []
    if cursor is not None:
        owned = state.held_tool_call_ids(request.existing_message_id or run.response_message_id)
    return ResponseFilter(run_id=run.id, owned_tool_call_ids=owned, cursor=cursor, tool_names=state.tool_names)
