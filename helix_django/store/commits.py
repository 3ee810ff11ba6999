"""Sessions and run starts: a run's first commit, its status updates, a session's deletion.

Every write of a run is fenced on its run id (002, "Superseded runs"); the shared row
writes are :mod:`helix_django.store.rows`; a run's step and terminal commits are
:mod:`helix_django.store.run_ends`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from helix_django.conf import helix_settings
from helix_django.errors import (
    AlreadyRunningError,
    RunStartConflictError,
    SessionFullError,
    SessionNotFoundError,
)
from helix_django.ids import new_id
from helix_django.limits import check_message_size
from helix_django.models import (
    ChatSession,
    Checkpoint,
    CheckpointKind,
    Message,
    Run,
    RunStatus,
)
from helix_django.models.run import FOLLOW_UP_RESOLUTION, RESOLUTION_OF_KIND, SUPERSEDED_RESOLUTION
from helix_django.models.session import default_agent
from helix_django.orm import retrying, sync_to_async
from helix_django.store import reads
from helix_django.store.inserts import insert
from helix_django.store.recovery import record_interruption, record_resolution
from helix_django.store.rows import insert_checkpoint, lock_fence, lock_session, save_session, write_message

_UNSET: Any = object()


@dataclasses.dataclass(frozen=True)
class NewSession:
    """A session a run-start commit creates when its row does not exist yet (a chat's first send).

    Its owner is ``owner_id`` or, for anonymous chat, the visitor's owner token ``anonymous_key``.
    """

    owner_id: int | None = None
    anonymous_key: str = ""
    agent: str = dataclasses.field(default_factory=default_agent)


@dataclasses.dataclass
class RunStartRequest:
    """Everything the run-start commit writes (000, "Persist the turn before starting inference").

    ``input_messages`` are UIMessages appended after the committed rows; an input whose id
    is already an active row replaces that row (a ``tool_result`` continuation sends the
    assistant message it continues, which then also becomes the response message).
    ``truncate_to`` rewinds the conversation to that many rows first (a ``truncate``
    checkpoint). ``expected_current_run_id`` is the compare-and-set on the session's current run (``_UNSET`` skips it).
    ``new_session``: create the session in the same transaction when it does not exist yet.
    ``in_transaction``: called with the result inside the run-start transaction, after
    its writes; what it returns is the result's ``joined``, and what it raises rolls the
    whole start back (the executor claims the stream there: one transaction and one
    thread hop before the first byte).
    ``status``: the Run's first status (``streaming`` when the caller executes it at once:
    the run's task then writes no status of its own). ``read_context``: also read, in the
    same transaction, the committed rows before the response message (the result's
    ``context``: the conversation the run's model is sent, without a hop of its own).
    ``interrupted_run_id``: the live run this send stopped for itself (multitask
    ``interrupt``); the commit records it as that run's resolution
    (:func:`~helix_django.store.recovery.record_interruption`).
    """

    session_id: str
    kind: str = "send"
    input_messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    stream_sequence: int = 0
    agent: str = "default"
    provider: str = ""
    model: str = ""
    request_key: str | None = None
    input_hash: str = ""
    turn_message_id: str = ""
    attempt: int = 1
    truncate_to: int | None = None
    response_message_id: str | None = None
    expected_current_run_id: Any = _UNSET
    supersede_live: bool = False
    lease_owner: str = ""
    lease_seconds: int = 30
    continuation: dict[str, Any] = dataclasses.field(default_factory=dict)
    new_session: NewSession | None = None
    in_transaction: Callable[[RunStartResult], Any] | None = None
    status: str = RunStatus.STARTING
    read_context: bool = False
    interrupted_run_id: str = ""


@dataclasses.dataclass(frozen=True)
class RunStartResult:
    """The run created by a run-start commit, its checkpoint, and the runs it superseded."""

    run: Run
    checkpoint: Checkpoint
    truncate_checkpoint: Checkpoint | None
    superseded_run_ids: list[str]
    joined: Any = None
    """What the request's ``in_transaction`` returned (None without one)."""
    rewrote_history: bool = False
    """Whether the commit truncated or replaced committed rows (it did more than append)."""
    context: list[dict[str, Any]] | None = None
    """With ``read_context``: the UIMessages at positions before the response message, oldest first."""


def _is_owner(session: ChatSession, new: NewSession) -> bool:
    return (session.owner_id, session.anonymous_key) == (new.owner_id, new.anonymous_key)


def get_or_create_session(
    session_id: str, *, owner_id: int | None = None, anonymous_key: str = "", agent: str | None = None
) -> tuple[ChatSession, bool]:
    """Return ``(session, created)``; a new session belongs to ``owner_id`` or ``anonymous_key``.

    Its agent is ``agent``, or ``HELIX["DEFAULT_AGENT"]`` (:func:`~helix_django.models.session.default_agent`).

    Ownership is checked by callers (another owner's session is "not found" to them).
    """
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is not None:  # the common case: no transaction, no write lock
        return session, False
    try:
        with transaction.atomic(using=reads.write_alias()):
            fields = {"owner_id": owner_id, "anonymous_key": anonymous_key, "agent": agent or default_agent()}
            return ChatSession.objects.create(pk=session_id, **fields), True
    except IntegrityError:  # created by a concurrent request since the read above (read where it was written)
        return ChatSession.objects.using(reads.write_alias()).get(pk=session_id), False


def start_run(request: RunStartRequest) -> RunStartResult:
    """Do the run-start commit: input rows, the Run and a ``run_start`` checkpoint, atomically.

    A compare-and-set on the session's current run. Raises SessionNotFoundError,
    RunStartConflictError (``cause: expected_mismatch``) when the current run moved,
    AlreadyRunningError when a run is live and ``supersede_live`` is false. Every other
    live run of the session is superseded. The run id doubles as the stream claim's owner;
    the run-start checkpoint's id is its claim epoch. Raises MessageTooLargeError (413) for
    an input message over ``MAX_MESSAGE_BYTES`` and SessionFullError (409) when the commit
    would add rows past ``MAX_SESSION_MESSAGES`` (docs/limits.md); nothing is written. With ``request.new_session`` a
    missing session is created in the same transaction (nothing is left behind when the
    commit fails); when a concurrent first send created it first, the start is tried
    again in the existing session, if the same owner created it.
    """
    try:
        return _start_run(request, create=request.new_session is not None)
    except IntegrityError:
        if request.new_session is None:
            raise
        # The session exists: a concurrent first send (or one since the caller's read)
        # created it. Start in it, if it belongs to the owner the request names.
        return _start_run(request, create=False)


def _check_session_room(before: int, after: int) -> None:
    """Raise SessionFullError when a commit adds rows (``before`` -> ``after``) past ``MAX_SESSION_MESSAGES``."""
    limit = helix_settings.MAX_SESSION_MESSAGES
    if after > before and after > limit:
        raise SessionFullError(cause="session_messages", limitMessages=limit, messageCount=before)


def _start_run(request: RunStartRequest, *, create: bool) -> RunStartResult:
    now = timezone.now()
    for message in request.input_messages:
        check_message_size(message)
    with transaction.atomic(using=reads.write_alias()):
        if create:  # inserted with its first run below: no read first, the primary key refuses a duplicate
            assert request.new_session is not None  # create is True only for a request naming a new session
            session = ChatSession(pk=request.session_id, **dataclasses.asdict(request.new_session))
        else:
            session = lock_session(request.session_id)
            if request.new_session is not None and not _is_owner(session, request.new_session):
                raise SessionNotFoundError()  # created first by a concurrent send of another owner
        if request.expected_current_run_id is not _UNSET and session.current_run_id != request.expected_current_run_id:
            raise RunStartConflictError(cause="expected_mismatch")
        live = [] if create else reads.live_run_ids(session.pk)  # a session this commit creates has no runs
        if live and not request.supersede_live:
            raise AlreadyRunningError()
        run_id = new_id("run")
        if live:
            Run.objects.filter(pk__in=live).update(
                status=RunStatus.SUPERSEDED, finished_at=now, recovery_action=SUPERSEDED_RESOLUTION, resolved_by=run_id
            )
        earlier_run_id = session.current_run_id
        count = session.message_count
        truncate_cp = None
        if request.truncate_to is not None and request.truncate_to < count:
            Message.objects.filter(session=session, position__gte=request.truncate_to).update(
                position=None, archived_at=now
            )
            count = request.truncate_to
            session.message_count = count
            truncate_cp = insert_checkpoint(session, None, CheckpointKind.TRUNCATE, count, request.stream_sequence, 0)
        inputs = list(request.input_messages)
        known = reads.active_positions(session.pk, [m["id"] for m in inputs if m.get("id")]) if count else {}
        positions, first_new = [], count
        for message in inputs:
            if message.get("id") in known:
                positions.append(known[message["id"]])
            else:
                positions.append(count)
                count += 1
        response_position = count
        response_id = request.response_message_id or new_id("msg")
        if inputs and inputs[-1].get("role") == "assistant":
            response_position = positions[-1]
            response_id = inputs[-1]["id"]
        _check_session_room(first_new, response_position + 1 if response_position == count else count)
        run = Run(
            id=run_id,
            session=session,
            status=request.status,
            kind=request.kind,
            turn_message_id=request.turn_message_id,
            attempt=request.attempt,
            agent=request.agent,
            provider=request.provider,
            model=request.model,
            request_key=request.request_key,
            input_hash=request.input_hash,
            start_message_count=response_position,
            start_sequence=request.stream_sequence,
            response_message_id=response_id,
            lease_owner=request.lease_owner,
            lease_expires_at=now + timedelta(seconds=request.lease_seconds) if request.lease_owner else None,
            last_event_at=now,
            started_at=now,
            continuation=request.continuation,
        )
        message_count = count
        session.current_run, session.message_count = run, message_count
        if create:  # one INSERT with its final fields (foreign keys are checked at commit)
            insert(session)
        insert(run)
        if earlier_run_id and earlier_run_id == request.interrupted_run_id:
            record_interruption(earlier_run_id, by_run_id=run_id)
        elif earlier_run_id and earlier_run_id not in live:
            # The run this one follows is resolved by it (000, "Recovery actions"), whichever surface started it.
            resolution = RESOLUTION_OF_KIND.get(request.kind, FOLLOW_UP_RESOLUTION)
            record_resolution(earlier_run_id, resolution, by_run_id=run_id)
        cp = insert_checkpoint(session, run, CheckpointKind.RUN_START, message_count, request.stream_sequence, 0)
        for position, message in zip(positions, inputs, strict=True):
            # Positions from ``first_new`` on hold no active row (the session counts [0, n)).
            write_message(session, position, message, run=run, checkpoint_id=cp.id, is_new=position >= first_new)
        if not create:
            save_session(session, "current_run", "message_count")
        result = RunStartResult(
            run=run,
            checkpoint=cp,
            truncate_checkpoint=truncate_cp,
            superseded_run_ids=live,
            rewrote_history=truncate_cp is not None or any(position < first_new for position in positions),
        )
        if request.read_context:
            rows = reads.read_rows(session.pk, before=response_position, using=reads.write_alias())
            result = dataclasses.replace(result, context=[row.ui_message() for row in rows])
        if request.in_transaction is not None:
            result = dataclasses.replace(result, joined=request.in_transaction(result))
    return result


def update_run(run_id: str, **fields: Any) -> None:
    """Set fields of a live run (status transitions, provider operation id, continuation).

    Fenced: raises RunSupersededError when the run no longer holds its session.
    Always refreshes ``last_event_at``.
    """
    with transaction.atomic(using=reads.write_alias()):
        lock_fence(run_id)
        fields.setdefault("last_event_at", timezone.now())
        Run.objects.filter(pk=run_id).update(**fields)


def delete_session(session_id: str) -> None:
    """Delete a session with its messages, runs and checkpoints (cascade).

    The session row is locked first, as every write of its runs locks it (002,
    "Superseded runs"): the cascade's row locks never come before it (on PostgreSQL a
    fenced write holding the session while the delete held its message rows deadlocked).
    A run write waiting on the lock then finds its run gone (RunNotFoundError).
    """
    with transaction.atomic(using=reads.write_alias()):
        if reads.read_session(session_id, lock=True) is not None:
            ChatSession.objects.filter(pk=session_id).delete()


aget_or_create_session = sync_to_async(get_or_create_session)
astart_run = sync_to_async(start_run)
# A live run's write survives a short database outage (helix_django.orm.retrying): it is one
# transaction, so a failed attempt committed nothing.
aupdate_run = retrying(update_run)
