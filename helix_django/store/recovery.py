"""Recovery writes: bookkeeping, status transitions and partial-answer decisions (000, "Recovery actions")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from helix_django.errors import (
    RunNotActionableError,
    RunNotFoundError,
)
from helix_django.models import (
    LIVE_STATUSES,
    CancelledBy,
    Checkpoint,
    CheckpointKind,
    Message,
    Run,
    RunStatus,
    ToolExecution,
    ToolExecutionStatus,
)
from helix_django.models.run import INTERRUPTED_RESOLUTION, RESOLUTIONS, RESOLVABLE_STATUSES
from helix_django.orm import sync_to_async
from helix_django.store import reads
from helix_django.store.rows import insert_checkpoint, lock_session

#: Run fields a recovery may set on a run in any status (never its status or fence).
RECOVERY_FIELDS = frozenset(
    {
        "recovery_action",
        "is_continuation_valid",
        "provider_cancel_result",
        "cancel_requested_at",
        "cancelled_by",
        "interrupted_stage",
    }
)


def record_recovery(run_id: str, **fields: Any) -> None:
    """Set recovery bookkeeping (:data:`RECOVERY_FIELDS`) on a run in any status (000, "Recovery actions").

    Raises RunNotFoundError for an unknown run, ValueError for any other field.
    """
    if set(fields) - RECOVERY_FIELDS:
        raise ValueError(f"not a recovery field: {sorted(set(fields) - RECOVERY_FIELDS)}")
    if not Run.objects.filter(pk=run_id).update(**fields):
        raise RunNotFoundError()


def record_resolution(run_id: str, action: str, *, by_run_id: str = "") -> bool:
    """Record how an interrupted or failed run was resolved: ``action`` and the run that followed it.

    The one place every surface's resolution is written (000, "Recovery actions"): the
    run-start commit of a Regenerate, Continue or new message after the run (chat route,
    recovery routes, admin, WebSocket), and the admin's Keep/Discard. A compare-and-set:
    returns False, writing nothing, for a run in another status or already resolved
    (:data:`~helix_django.models.run.RESOLUTIONS`), so the first resolution stays.
    """
    runs = Run.objects.filter(pk=run_id, status__in=RESOLVABLE_STATUSES).exclude(recovery_action__in=RESOLUTIONS)
    return bool(runs.update(recovery_action=action, resolved_by=by_run_id))


def record_interruption(run_id: str, *, by_run_id: str) -> bool:
    """Record that run ``by_run_id`` stopped run ``run_id`` for itself (multitask ``interrupt``).

    Sets ``recovery_action`` to ``interrupted_by_follow_up`` and ``resolved_by``, only on a
    run cancelled with ``cancelled_by: follow_up`` and not yet resolved (a compare-and-set:
    False, writing nothing, otherwise; a Stop of the owner's that came first stays the
    owner's).
    """
    runs = Run.objects.filter(pk=run_id, status=RunStatus.CANCELLED, cancelled_by=CancelledBy.FOLLOW_UP, resolved_by="")
    return bool(runs.update(recovery_action=INTERRUPTED_RESOLUTION, resolved_by=by_run_id))


def claim_partial_decision(run_id: str, action: str) -> bool:
    """Record ``action`` (keep or discard the partial) as the run's recovery action, once.

    A compare-and-set: returns False, writing nothing, when the run's ``recovery_action``
    already is ``action`` (a second submit of the same decision, however close in time),
    so the decision is taken, logged and signalled once (000, "Recovery actions").
    Raises RunNotFoundError for an unknown run.
    """
    if Run.objects.filter(pk=run_id).exclude(recovery_action=action).update(recovery_action=action):
        return True
    if not Run.objects.filter(pk=run_id).exists():
        raise RunNotFoundError()
    return False


def claim_cancel_check(run_id: str, checks: int) -> bool:
    """Count one more question to the provider about the run's unclear cancel, once (compare-and-set).

    Moves ``provider_cancel_checks`` from ``checks`` to ``checks + 1`` and stamps
    ``provider_cancel_checked_at``; returns False, writing nothing, when another process
    counted it first (two scans never ask twice for one try).
    """
    return bool(
        Run.objects.filter(pk=run_id, provider_cancel_checks=checks).update(
            provider_cancel_checks=checks + 1, provider_cancel_checked_at=timezone.now()
        )
    )


def transition_run(
    run_id: str, from_statuses: frozenset[str], status: str, *, lease_owner: str = "", lease_seconds: int = 30
) -> bool:
    """Move the session's current run from one of ``from_statuses`` to ``status`` (compare-and-set).

    Used by recovery (``interrupted`` -> ``recovering`` while it checks a provider
    operation); takes the lease for ``lease_owner``. Returns False, changing nothing, when
    the run is in another status or no longer its session's current run.
    """
    now = timezone.now()
    with transaction.atomic(using=reads.write_alias()):
        run = reads.read_run(run_id)  # on the alias the transaction writes to, like every read below
        if run is None:
            raise RunNotFoundError()
        session = lock_session(run.session_id)
        if session.current_run_id != run_id:
            return False
        expires = now + timedelta(seconds=lease_seconds) if lease_owner else None
        return bool(
            Run.objects.filter(pk=run_id, status__in=from_statuses).update(
                status=status, lease_owner=lease_owner, lease_expires_at=expires, last_event_at=now, finished_at=None
            )
        )


def archive_response(run_id: str, *, stream_sequence: int) -> Checkpoint:
    """Remove ``run``'s response row from the conversation ("Discard partial"), with a ``truncate`` checkpoint.

    The row keeps its content, archived (``position=None``), so the attempt stays
    auditable. Only for a terminal run that is still its session's current run: raises
    RunNotFoundError, or RunNotActionableError when the run is live or a later turn exists.
    """
    now = timezone.now()
    with transaction.atomic(using=reads.write_alias()):
        of_run = reads.read_run(run_id)  # the write alias: a read replica may not have the run's ending yet
        if of_run is None:
            raise RunNotFoundError()
        session = lock_session(of_run.session_id)
        run = reads.read_run(run_id)  # its status under the session lock: a recovery may have moved it since
        if run is None:
            raise RunNotFoundError()
        if session.current_run_id != run_id or run.status in LIVE_STATUSES:
            raise RunNotActionableError(cause="not_current_terminal_run")
        count = run.start_message_count
        Message.objects.filter(session=session, position__gte=count).update(position=None, archived_at=now)
        session.message_count = count
        cp = insert_checkpoint(session, None, CheckpointKind.TRUNCATE, count, stream_sequence, 0)
        session.save(update_fields=["message_count", "updated_at"])
    return cp


def resolve_tool_execution(execution_id: int, *, status: str, result: Any = None, error_code: str = "") -> None:
    """Record staff's resolution of a tool execution whose outcome was ``unknown``.

    ``status`` is ``succeeded`` (it ran; ``result`` is its JSON result) or ``failed``
    (``error_code`` says why, e.g. ``not_executed``). Raises RunNotActionableError
    (``cause: tool_not_unknown``) when the execution is not ``unknown``.
    """

    if status not in (ToolExecutionStatus.SUCCEEDED, ToolExecutionStatus.FAILED):
        raise ValueError(f"not a resolution status: {status}")
    updated = ToolExecution.objects.filter(pk=execution_id, status=ToolExecutionStatus.UNKNOWN).update(
        status=status, result=result, error_code=error_code, finished_at=timezone.now()
    )
    if not updated:
        raise RunNotActionableError(cause="tool_not_unknown")


arecord_recovery = sync_to_async(record_recovery)
arecord_resolution = sync_to_async(record_resolution)
aclaim_partial_decision = sync_to_async(claim_partial_decision)
aclaim_cancel_check = sync_to_async(claim_cancel_check)
atransition_run = sync_to_async(transition_run)
aarchive_response = sync_to_async(archive_response)
aresolve_tool_execution = sync_to_async(resolve_tool_execution)
