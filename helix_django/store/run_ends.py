"""A run's step and terminal commits: its response message, the session's count and a checkpoint.

Each is one transaction fenced on the run id (002, "Superseded runs"), through
:mod:`helix_django.store.rows`. :func:`commit_completion` is a run's last step and its end
in one transaction that reads and writes each row once (not the step commit then the
terminal commit, each fencing, reading and writing the same rows).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from helix_django.errors import HelixError, RunSupersededError
from helix_django.models import ChatSession, Checkpoint, CheckpointKind, Message, Run, RunStatus
from helix_django.orm import retrying
from helix_django.store import reads
from helix_django.store.inserts import update
from helix_django.store.rows import (
    fenced_run,
    insert_checkpoint,
    lock_fence,
    lock_session,
    save_session,
    write_message,
)
from helix_django.usage import chars_of, finish_stored

#: Statuses a terminal commit may write.
TERMINAL_COMMIT_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}
)


def commit_step(
    run_id: str,
    *,
    response_message: dict[str, Any],
    stream_sequence: int,
    step_count: int,
    state: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
) -> Checkpoint:
    """Commit a finished step: the response message so far, the state, a ``step`` checkpoint.

    ``response_message`` is a UIMessage ``{id, role, parts, metadata}``; ``usage``: the
    run's usage record so far (:mod:`helix_django.usage`; None: unchanged). Raises
    RunSupersededError when the run no longer holds its session (nothing is written).
    """
    with transaction.atomic(using=reads.write_alias()):
        session, run = fenced_run(run_id)
        if state is not None:
            session.state = state
        count = run.start_message_count + 1
        cp = insert_checkpoint(session, run, CheckpointKind.STEP, count, stream_sequence, step_count)
        write_message(session, run.start_message_count, response_message, run=run, checkpoint_id=cp.id)
        session.message_count = count
        session.save(update_fields=["state", "message_count", "updated_at"])
        fields: dict[str, Any] = {"step_count": step_count, "last_event_at": timezone.now()}
        if usage is not None:
            fields["usage"] = usage
        Run.objects.filter(pk=run_id).update(**fields)
    return cp


def helix_metadata(run_id: str, status: str, *, cancelled_by: str = "") -> dict[str, Any]:
    """Return a response message's ``helix`` metadata: ``{runId, status, partial, cancelledBy?}``.

    ``partial`` is true for every status but ``completed`` (000, "Store partial output
    explicitly"); ``cancelledBy`` (``user`` | ``staff`` | ``system`` | ``follow_up``) only for a cancelled
    run whose canceller is known (the chat says who stopped it).
    """
    metadata: dict[str, Any] = {"runId": run_id, "status": status, "partial": status != RunStatus.COMPLETED}
    if status == RunStatus.CANCELLED and cancelled_by:
        metadata["cancelledBy"] = cancelled_by
    return metadata


def commit_terminal(
    run_id: str,
    status: str,
    *,
    response_message: dict[str, Any] | None,
    stream_sequence: int,
    step_count: int | None = None,
    error: HelixError | None = None,
    stage: str = "",
    state: dict[str, Any] | None = None,
    allow_terminal_from: frozenset[str] = frozenset(),
    usage: dict[str, Any] | None = None,
) -> Checkpoint:
    """End the run with ``status`` (completed / failed / cancelled / interrupted) and a ``terminal`` checkpoint.

    The response message, when it has parts, is written with metadata
    ``helix = {runId, status, partial}``; for any status but completed it is marked
    partial and never shown as a finished answer (000, "Store partial output
    explicitly"). ``error`` is kept scrubbed (code, category, retryable, fixed message).
    ``allow_terminal_from`` lets recovery end a run already in one of those statuses.
    ``usage``: the run's usage record (:mod:`helix_django.usage`); None (a run ended
    without its process) completes the stored one, the text no report covers estimated.
    Returns the terminal checkpoint; its ``run`` is the Run as committed (no re-read
    needed). Raises RunSupersededError when the run no longer holds its session.
    """
    if status not in TERMINAL_COMMIT_STATUSES:
        raise ValueError(f"not a terminal status: {status}")
    with transaction.atomic(using=reads.write_alias()):
        try:
            session, run = fenced_run(run_id)
        except RunSupersededError:
            found = reads.read_run(run_id)  # under the session lock, on the alias the transaction writes to
            if found is None or found.status not in allow_terminal_from:
                raise
            run, session = found, lock_session(found.session_id)
            if session.current_run_id != run_id:
                raise
        if state is not None:
            session.state = state
        return _end(
            session, run, status, response_message, stream_sequence, step_count, error=error, stage=stage, usage=usage
        )


def _end(
    session: ChatSession,
    run: Run,
    status: str,
    response_message: dict[str, Any] | None,
    stream_sequence: int,
    step_count: int | None,
    *,
    error: HelixError | None = None,
    stage: str = "",
    usage: dict[str, Any] | None = None,
) -> Checkpoint:
    """The terminal commit's writes, inside its transaction, on the fenced ``session`` and ``run``."""
    now = timezone.now()
    count = run.start_message_count
    parts = (response_message or {}).get("parts") or []
    partial_chars = chars_of(parts)
    if parts or Message.objects.using(reads.write_alias()).filter(session=session, position=count).exists():
        # Without output, a continuation's row (the message it continued) stays counted:
        # the active rows are exactly [0, message_count) (start_run inserts after them).
        count += 1
    cp = insert_checkpoint(session, run, CheckpointKind.TERMINAL, count, stream_sequence, step_count or run.step_count)
    if parts:
        assert response_message is not None
        metadata = dict(response_message.get("metadata") or {})
        metadata["helix"] = helix_metadata(run.id, status, cancelled_by=run.cancelled_by)
        write_message(
            session, run.start_message_count, {**response_message, "metadata": metadata}, run=run, checkpoint_id=cp.id
        )
    session.message_count = count
    save_session(session, "state", "message_count")
    fields: dict[str, Any] = {
        "status": status,
        "finished_at": now,
        "last_event_at": now,
        "lease_owner": "",
        "lease_expires_at": None,
        "partial_chars": partial_chars if status != RunStatus.COMPLETED else 0,
        "usage": usage if usage is not None else finish_stored(run.usage, partial_chars),
    }
    if step_count is not None:
        fields["step_count"] = step_count
    if stage:
        fields["interrupted_stage"] = stage
    if error is not None:
        detail = error.to_detail()
        fields.update(
            error_code=detail["code"],
            error_category=detail["category"],
            error_retryable=detail["retryable"],
            error_message=detail["message"][:200],
            error_cause=(error.cause or "")[:40],
        )
    update(Run, {"id": run.id}, fields)
    for name, value in fields.items():  # the checkpoint's ``run`` is the run as committed
        setattr(run, name, value)
    return cp


def commit_completion(
    run_id: str,
    *,
    response_message: dict[str, Any],
    stream_sequence: int,
    step_message: dict[str, Any] | None = None,
    step_sequence: int = 0,
    step_count: int = 0,
    fenced: bool = False,
    usage: dict[str, Any] | None = None,
) -> tuple[Checkpoint | None, Checkpoint]:
    """Complete the run, with its last step when ``step_message`` is given, in one transaction.

    The rows end as a step commit (:func:`commit_step`, at ``step_sequence``) then the
    terminal commit (:func:`commit_terminal`, ``completed``, at ``stream_sequence``) leave
    them, written once: one fence and one read of the session and the run, the step's
    checkpoint, then the terminal's writes (the response message row once, the session and
    the run once). The step's message row is written only when the terminal writes none
    (a reply without parts). ``fenced``: the caller's transaction passed
    :func:`lock_run` already. Returns (the step checkpoint or None, the terminal
    checkpoint). ``usage``: the run's usage record (:func:`commit_terminal`). Raises
    RunNotFoundError, RunSupersededError (nothing is written).
    """
    with transaction.atomic(using=reads.write_alias()):
        session, run = fenced_run(run_id, fenced=fenced)
        step = None
        if step_message is not None:
            count = run.start_message_count + 1
            step = insert_checkpoint(session, run, CheckpointKind.STEP, count, step_sequence, step_count)
            if not response_message.get("parts"):
                write_message(session, run.start_message_count, step_message, run=run, checkpoint_id=step.id)
            run.step_count = step_count
        terminal = _end(
            session,
            run,
            RunStatus.COMPLETED,
            response_message,
            stream_sequence,
            step_count if step else None,
            usage=usage,
        )
    return step, terminal


def lock_run(run_id: str) -> None:
    """Inside the caller's transaction: lock the run's session and check the run may still write.

    For a transaction that writes the run's stream before its commits (a run's last
    writes): it takes the session row first, the order every run write and run
    start locks in. Raises RunNotFoundError, RunSupersededError (as every fenced write).
    """
    lock_fence(run_id)


# A live run's writes survive a short database outage (helix_django.orm.retrying): each is one
# transaction, so a failed attempt committed nothing.
acommit_step = retrying(commit_step)
acommit_terminal = retrying(commit_terminal)
acommit_completion = retrying(commit_completion)
