"""The rows every commit of a run writes: the fence on the run, message rows, checkpoints.

Every write of a run is fenced on its run id (002, "Superseded runs"): :func:`lock_fence`
locks the run's session row first, the order every run write and run start locks in.
These run inside the caller's transaction (:mod:`helix_django.store.commits`,
:mod:`helix_django.store.run_ends`, :mod:`helix_django.store.recovery`).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from helix_django.errors import RunNotFoundError, RunSupersededError, SessionNotFoundError
from helix_django.models import LIVE_STATUSES, ChatSession, Checkpoint, Message, Run
from helix_django.store import reads
from helix_django.store.inserts import insert, update


def lock_session(session_id: str) -> ChatSession:
    """Lock and return the session row (inside the caller's transaction). Raises SessionNotFoundError."""
    session = reads.read_session(session_id, lock=True)
    if session is None:
        raise SessionNotFoundError()
    return session


def lock_fence(run_id: str) -> str:
    """Lock the run's session and check that the run may still write; return the session id.

    The fence of every write of a run (002, "Superseded runs"): the session row is locked
    through the run (``FOR UPDATE`` where the database has it; on SQLite the IMMEDIATE
    transaction already holds the write lock), then the run's status is read under that
    lock. Two bare statements: the ORM's query building cost more than both
    (docs/performance.md). Call inside a transaction. Raises RunNotFoundError when the run
    or its session is gone, RunSupersededError when the run is no longer its session's
    current run or no longer live.
    """
    connection = connections[reads.write_alias()]
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    session_table, run_table = ChatSession._meta.db_table, Run._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, current_run_id FROM {session_table} "  # noqa: S608
            f"WHERE id = (SELECT session_id FROM {run_table} WHERE id = %s){lock}",
            [run_id],
        )
        session_row = cursor.fetchone()
        cursor.execute(f"SELECT status FROM {run_table} WHERE id = %s", [run_id])  # noqa: S608
        run_row = cursor.fetchone()
    if session_row is None or run_row is None:
        raise RunNotFoundError()
    if session_row[1] != run_id or run_row[0] not in LIVE_STATUSES:
        raise RunSupersededError()
    return session_row[0]


def fenced_run(run_id: str, *, fenced: bool = False) -> tuple[ChatSession, Run]:
    """Lock the run's session (:func:`lock_fence`) and return (session, run) read under that lock.

    ``fenced``: the caller's transaction already passed :func:`lock_fence` for this run (a
    run's last writes lock before they append): the rows are read without checking again.
    Raises what :func:`lock_fence` raises.
    """
    if fenced:
        run = reads.read_run(run_id)
        if run is None:
            raise RunNotFoundError()
        session = reads.read_session(run.session_id, lock=True)
    else:
        session_id = lock_fence(run_id)
        session, run = reads.read_session(session_id, lock=True), reads.read_run(run_id)
    assert session is not None and run is not None  # locked by the fence: neither can be gone
    return session, run


def write_message(
    session: ChatSession,
    position: int,
    ui_message: dict[str, Any],
    *,
    run: Run | None,
    checkpoint_id: int,
    is_new: bool = False,
) -> Message:
    """Insert or replace the active row at ``position`` (``is_new``: the caller knows none is there)."""
    fields = {
        "ui_id": ui_message["id"],
        "role": ui_message["role"],
        "parts": ui_message.get("parts", []),
        "metadata": ui_message.get("metadata") or {},
        "run": run,
        "checkpoint_id": checkpoint_id,
    }
    updated = 0 if is_new else update(Message, {"session": session, "position": position}, fields)
    if updated:
        return Message(session=session, position=position, **fields)
    message = Message(session=session, position=position, **fields)
    insert(message)
    return message


def insert_checkpoint(
    session: ChatSession, run: Run | None, kind: str, message_count: int, sequence: int, step_count: int
) -> Checkpoint:
    """Insert a ``kind`` checkpoint of ``session`` (its state as it is now) and return it."""
    checkpoint = Checkpoint(
        session=session,
        run=run,
        kind=kind,
        message_count=message_count,
        stream_sequence=sequence,
        step_count=step_count,
        state=session.state,
    )
    insert(checkpoint)
    return checkpoint


def save_session(session: ChatSession, *names: str) -> None:
    """Write the fields ``names`` of ``session`` and its ``updated_at``, as ``save(update_fields=...)`` would.

    A bare UPDATE (:func:`helix_django.store.inserts.update`) unless something listens to
    the session's ``pre_save``/``post_save`` signals: then ``save()`` itself, which sends them.
    """
    if pre_save.has_listeners(ChatSession) or post_save.has_listeners(ChatSession):
        session.save(update_fields=[*names, "updated_at"])
        return
    session.updated_at = timezone.now()
    update(ChatSession, {"id": session.pk}, {name: getattr(session, name) for name in (*names, "updated_at")})
