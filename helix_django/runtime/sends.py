"""Sends: ``execute()``, the chat route's entry point, and a plain send started in its request's thread hop.

:func:`execute` starts the run a chat request asks for: a send (a trailing user
message, maybe an edit), a tool result or approval answer (a trailing assistant message),
or a regenerate. A send starts optimistically; the session's current run is examined only
when the run-start commit finds it live (:func:`_start_send`).

A plain send in one thread hop and one transaction: a chat route's
request makes one trip to the ORM's thread anyway (the host's middleware,
authentication, the session read). A plain send (a new user message, ``submit-message``,
no edit) also does its run-start commit in that trip, with the stream claim and the
opening chunks in the same transaction where the stream manager is the database's
(:meth:`~helix_django.runtime.starts.RunStarts.commit_in_thread`); back on the loop,
:func:`aopen_send` opens the run (its task, or its hand-off) without another hop.

Whatever this path cannot decide alone goes the way of ``execute()`` (:func:`start_send_in_thread`
returns None and changes nothing): a keyed repeat (it attaches to the run of its key,
002), a live run in the session (superseded, retired or refused by ``_start_send``), a
lost compare-and-set, an existing session whose stream head is unknown on the ORM's thread.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.db import DatabaseError, IntegrityError
from django.utils.translation import gettext_lazy

from helix_django import store
from helix_django.errors import (
    AlreadyRunningError,
    RunNotActionableError,
    RunStartConflictError,
    ValidationError,
)
from helix_django.ids import validate_request_key
from helix_django.models import CancelledBy, ChatSession, Run, RunStatus
from helix_django.runtime import cancels, multitask, restarts, tool_results
from helix_django.runtime import requests as rq
from helix_django.runtime.enqueue import QueuedSend, aenqueue
from helix_django.runtime.entries import acurrent_run, typed, typed_errors
from helix_django.runtime.followups import asettle_pending_calls
from helix_django.runtime.handles import Launch, RunHandle
from helix_django.runtime.retirement import aretire_if_dead
from helix_django.runtime.starts import RunStarts
from helix_django.store.reads import write_alias
from helix_django.streams import get_stream_manager
from helix_django.streams.transactions import joined_transactions

logger = logging.getLogger("helix_django.runtime.executor")


@dataclasses.dataclass(frozen=True)
class StartedSend:
    """A send whose run-start commit landed on the ORM's thread; open it on the loop (:func:`aopen_send`)."""

    session: ChatSession
    launch: Launch
    result: store.RunStartResult


def is_plain_send(messages: list[dict[str, Any]], *, trigger: str, message_id: str | None) -> bool:
    """Whether a chat body is a plain send: a trailing user message, ``submit-message``, no edited message."""
    return trigger == "submit-message" and not message_id and bool(messages) and messages[-1].get("role") == "user"


@typed
async def execute(
    starts: RunStarts,
    session: ChatSession,
    messages: list[dict[str, Any]],
    *,
    request_key: str | None = None,
    trigger: str = "submit-message",
    message_id: str | None = None,
    user: Any = None,
    multitask: str | None = None,
) -> RunHandle | QueuedSend:
    """Start the run a chat request asks for and return its handle once its stream is readable.

    A trailing user message is a send; a trailing assistant message carries tool
    results / approval answers; ``trigger="regenerate-message"`` regenerates. An
    unsaved ``session`` (a chat's first send) is created by the send's run-start
    commit, so a refused request leaves no session behind. ``multitask``: the strategy
    the request names for a send that meets a live run (:mod:`.multitask`; None: the
    agent's); under ``enqueue`` the send is stored and a :class:`~.enqueue.QueuedSend` is
    returned instead of a handle. Raises ValidationError, AlreadyRunningError (``state_already_running``),
    RequestKeyConflictError / RequestAlreadyCompletedError (``runId``), SessionNotFoundError.
    """
    if request_key is not None:
        validate_request_key(request_key)
    if trigger == "regenerate-message":
        return await restarts.regenerate(starts, session=session, request_key=request_key, user=user)
    if trigger != "submit-message":
        raise ValidationError(gettext_lazy("Invalid trigger"), cause="trigger")
    last = rq.validate_messages(messages)[-1]
    if last["role"] == "assistant":
        return await tool_results.tool_result_from_message(starts, session, last, user)
    if last["role"] != "user":
        raise ValidationError(gettext_lazy("The last message must be a user message"), cause="messages")
    request = rq.send_start_request(session.id, last, request_key=request_key)
    digest = request.input_hash
    if request_key:
        duplicate = await rq.akeyed_duplicate(starts.runs, session, request_key, digest)
        if duplicate is not None:
            return duplicate
    if message_id:  # an edited message: the conversation rewinds to its row first
        request.truncate_to = await rq.auser_position(session.id, message_id)
    try:
        return await _start_send(starts, session, request, user, messages, multitask)
    except (AlreadyRunningError, RunStartConflictError, IntegrityError):
        duplicate = await rq.akeyed_duplicate(starts.runs, session, request_key, digest) if request_key else None
        if duplicate is not None:
            return duplicate
        raise AlreadyRunningError() from None


async def _start_send(
    starts: RunStarts,
    session: ChatSession,
    request: store.RunStartRequest,
    user: Any,
    messages: list[dict[str, Any]],
    requested: str | None,
) -> RunHandle | QueuedSend:
    """Start a send optimistically; the session's current run is examined only if it is live.

    Most sends find no live run, so they skip reading it (one query and one thread hop
    less before the first byte). When the run-start commit finds one, a run waiting
    for client tools is superseded (a compare-and-set on it) and its pending calls are
    finished (:mod:`.followups`), a run nobody executes any more is retired, and a run
    that ended since the failed start is left alone; then the start is tried once more.
    A run still executing is stopped for the send when its strategy is ``interrupt``
    (``requested``, else the agent's: :mod:`.multitask`), or the send is stored to start
    after it under ``enqueue`` (:mod:`.enqueue`). Raises AlreadyRunningError while the live
    run still executes under ``reject`` (or another is live).
    """
    try:
        return await starts.launch(session, Launch(request), user=user)
    except AlreadyRunningError:
        current = await acurrent_run(session.id)
        if current is not None and current.is_live:
            executing = starts.runs.is_local(current.id)
            if not executing and current.status == RunStatus.SUSPENDED_CLIENT_TOOL:
                request.supersede_live, request.expected_current_run_id = True, current.id
                return await _supersede_waiting(starts, session, request, user, current, messages)
            # A crashed process's run is not "running": it is retired as the scan would.
            if executing or not await aretire_if_dead(current, starts):
                chosen = multitask.strategy(requested, session.agent)
                if chosen == multitask.ENQUEUE:
                    return await aenqueue(request, messages[-1], current)
                if chosen != multitask.INTERRUPT:
                    raise
                return await _interrupt(starts, session, request, user, current)
    return await starts.launch(session, Launch(request), user=user)


async def _interrupt(
    starts: RunStarts, session: ChatSession, request: store.RunStartRequest, user: Any, live: Run
) -> RunHandle:
    """Stop ``live`` for the send as the owner's Stop stops it, then start the send (multitask ``interrupt``).

    The run ends ``cancelled`` with ``cancelled_by: follow_up``, its partial answer kept
    (:func:`~helix_django.runtime.cancels.cancel`); the send's run-start commit records
    the interruption as its resolution. A run that ended otherwise meanwhile is left as it
    ended. Raises AlreadyRunningError when the run is still ending after the cancel's wait
    (or another run started first).
    """
    try:
        await cancels.cancel(starts.runs, session=session, run_id=live.id, by=CancelledBy.FOLLOW_UP)
    except RunNotActionableError:
        pass  # it ended otherwise: nothing to stop, the send starts after it
    else:
        request.interrupted_run_id = live.id
    return await starts.launch(session, Launch(request), user=user)


async def _supersede_waiting(
    starts: RunStarts,
    session: ChatSession,
    request: store.RunStartRequest,
    user: Any,
    waiting: Run,
    messages: list[Any],
) -> RunHandle:
    settlement = await asettle_pending_calls(waiting, messages)
    if settlement is None:
        return await starts.launch(session, Launch(request), user=user)
    request.input_messages = [settlement.row, *request.input_messages]
    handle = await starts.launch(session, Launch(request, lambda _r: settlement.chunks), user=user)
    try:
        await store.asettle_superseded_tool_executions(waiting.id, settlement.outcomes)
    except DatabaseError as exc:  # the run started: never answer the send as failed (a re-send duplicates it)
        logger.warning("run %s: its calls' outcomes were not recorded: %s", waiting.id, type(exc).__name__)
    return handle


def start_send_in_thread(
    starts: RunStarts,
    session: ChatSession,
    messages: list[dict[str, Any]],
    *,
    request_key: str | None = None,
    stream_sequence: int | None = None,
) -> StartedSend | None:
    """Do a plain send's run-start commit here, on the ORM's thread; None: leave the send to ``execute()``.

    ``session``: the caller's (unsaved for a chat's first send: the commit creates it).
    ``stream_sequence``: the session stream's head read on the loop, if it was; for an
    existing session without it, the head is read here where the manager can
    (the database manager), else None is returned. Raises what ``execute()`` raises
    for the same send (ValidationError, RequestKeyConflictError,
    RequestAlreadyCompletedError, MessageTooLargeError, SessionFullError,
    SessionNotFoundError; ``state_history_incomplete`` for a database failure).
    """
    with typed_errors("execute", logger):
        return _start_send_in_thread(starts, session, messages, request_key, stream_sequence)


def _start_send_in_thread(
    starts: RunStarts, session: ChatSession, messages: list[dict[str, Any]], request_key: str | None, head: int | None
) -> StartedSend | None:
    request = rq.send_start_request(session.id, rq.validate_messages(messages)[-1], request_key=request_key)
    digest, is_new = request.input_hash, session._state.adding
    if not is_new and request_key and rq.lookup_request_key(session.id, request_key, digest) is not None:
        return None  # a repeat attaches to its key's run: execute() answers it
    if not is_new and head is None:
        transactions = joined_transactions(get_stream_manager(), write_alias())
        if transactions is None:
            return None
        info = transactions.get_info(session.stream_id)
        head = info.head_sequence if info else 0
    launch = Launch(request)
    result = starts.commit_in_thread(session, launch, stream_sequence=head)
    return None if result is None else StartedSend(session, launch, result)


async def aopen_send(starts: RunStarts, started: StartedSend, *, user: Any = None, shielded: bool = False) -> RunHandle:
    """Open a send started on the ORM's thread where runs live: its claim (unless joined), its task.

    ``shielded``: the caller's task is one no cancel reaches before this returns
    (:meth:`~helix_django.runtime.runner.RunnerLoop.call`). Raises
    FrameworkInternalError (``cause: after_run_start``) as ``execute()`` does once a
    run-start commit landed.
    """
    return await starts.aopen(started.session, started.launch, started.result, user=user, shielded=shielded)
