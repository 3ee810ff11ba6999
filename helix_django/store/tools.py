"""Tool execution records (000, "Persist tool execution before model continuation")."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from helix_django.errors import (
    InvalidToolResultError,
    RunNotFoundError,
)
from helix_django.models import (
    Run,
    RunStatus,
    ToolExecution,
    ToolExecutionStatus,
)
from helix_django.orm import sync_to_async
from helix_django.store import reads
from helix_django.store.rows import lock_fence

# --- tool executions (written through helix_django.runtime.tool_calls) ---------------------

#: Tool execution statuses that are final: the outcome is known (or known to be unknown).
FINAL_TOOL_STATUSES = frozenset(
    {ToolExecutionStatus.SUCCEEDED, ToolExecutionStatus.FAILED, ToolExecutionStatus.DENIED, ToolExecutionStatus.UNKNOWN}
)


def save_tool_execution(
    run_id: str, fields: dict[str, Any], *, status: str, result: Any = None, error_code: str = ""
) -> ToolExecution:
    """Create or update the ToolExecution of ``(run_id, fields["tool_call_id"])`` with ``status``.

    ``fields``: ``tool_call_id``, ``name``, ``arguments``, ``effect``, ``idempotency_key``,
    ``is_client_tool``, ``step``. Sets ``started_at`` for ``started`` and ``finished_at``
    for a final status. Fenced like every run write: raises RunSupersededError when the
    run no longer holds its session, so a superseded run never starts a tool (000,
    "Persist tool execution before model continuation").
    """
    now = timezone.now()
    values = {k: v for k, v in fields.items() if k != "tool_call_id"}
    values.update(status=status, result=result, error_code=error_code)
    if status == ToolExecutionStatus.STARTED:
        values["started_at"] = now
    if status in FINAL_TOOL_STATUSES:
        values["finished_at"] = now
    with transaction.atomic(using=reads.write_alias()):
        lock_fence(run_id)
        execution, _created = ToolExecution.objects.update_or_create(
            run_id=run_id, tool_call_id=fields["tool_call_id"], defaults=values
        )
        Run.objects.filter(pk=run_id).update(last_event_at=now)
    return execution


def finish_tool_execution(
    run_id: str, tool_call_id: str, *, status: str, result: Any = None, error_code: str = ""
) -> bool:
    """Record the outcome of a ``started`` execution; True if it was recorded.

    Not fenced on the session: the side effect already happened, so its evidence is kept
    even when the run was superseded or cancelled meanwhile (000, "Then a crash between
    execution and continuation still leaves evidence").
    """
    now = timezone.now()
    return bool(
        ToolExecution.objects.filter(
            run_id=run_id, tool_call_id=tool_call_id, status=ToolExecutionStatus.STARTED
        ).update(status=status, result=result, error_code=error_code, finished_at=now)
    )


def answer_tool_execution(
    run_id: str, tool_call_id: str, *, status: str, result: Any = None, error_code: str = ""
) -> ToolExecution:
    """Store a browser's answer for a pending call: a client tool's result or an approval decision.

    ``awaiting_client`` -> ``succeeded``/``failed``; ``awaiting_approval`` -> ``approved``/``denied``.
    Fenced. Raises RunNotFoundError for an unknown call and InvalidToolResultError for
    a call that is not waiting for this kind of answer (already answered included).
    """
    allowed: dict[str, set[str]] = {
        ToolExecutionStatus.AWAITING_CLIENT: {ToolExecutionStatus.SUCCEEDED, ToolExecutionStatus.FAILED},
        ToolExecutionStatus.AWAITING_APPROVAL: {ToolExecutionStatus.APPROVED, ToolExecutionStatus.DENIED},
    }
    now = timezone.now()
    with transaction.atomic(using=reads.write_alias()):
        lock_fence(run_id)
        execution = ToolExecution.objects.select_for_update().filter(run_id=run_id, tool_call_id=tool_call_id).first()
        if execution is None:
            raise RunNotFoundError(gettext_lazy("Tool call not found"), cause="tool_call_unknown")
        if status not in allowed.get(execution.status, ()):
            raise InvalidToolResultError(cause="tool_call_not_pending")
        execution.status, execution.result, execution.error_code = status, result, error_code
        execution.finished_at = now if status in FINAL_TOOL_STATUSES else None
        execution.save(update_fields=["status", "result", "error_code", "finished_at"])
    return execution


def find_tool_executions(
    session_id: str, idempotency_key: str, *, exclude_call: tuple[str, str] | None = None
) -> list[ToolExecution]:
    """Return the session's executions with ``idempotency_key``, oldest first (``exclude_call``: (run, call))."""
    rows = ToolExecution.objects.filter(run__session_id=session_id, idempotency_key=idempotency_key)
    if exclude_call is not None:
        rows = rows.exclude(run_id=exclude_call[0], tool_call_id=exclude_call[1])
    return list(rows.order_by("id"))


def turn_run_ids(session_id: str, turn_message_id: str) -> set[str]:
    """Return the ids of the runs answering the current version of a turn.

    The turn is the user message ``turn_message_id`` and every run answering it: its latest
    ``send`` run and the runs after it (regenerates, continues, tool results). An edit sends
    the turn again under the same message id: the runs before it answered another text.
    """
    runs = Run.objects.filter(session_id=session_id, turn_message_id=turn_message_id)
    ids: list[str] = []
    for run_id, kind in runs.order_by("created_at", "id").values_list("id", "kind"):
        if kind == "send":
            ids = []
        ids.append(run_id)
    return set(ids)


def list_turn_tool_executions(session_id: str, turn_message_id: str) -> list[ToolExecution]:
    """Return the executions of the current version of a turn (:func:`turn_run_ids`), oldest first."""
    runs = turn_run_ids(session_id, turn_message_id)
    return list(ToolExecution.objects.filter(run_id__in=runs).order_by("id"))


def list_tool_executions(*, run_id: str | None = None, session_id: str | None = None) -> list[ToolExecution]:
    """Return the executions of a run or of a whole session, oldest first."""
    rows = ToolExecution.objects.all()
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    if session_id is not None:
        rows = rows.filter(run__session_id=session_id)
    return list(rows.order_by("id"))


def mark_started_tool_executions_unknown(run_id: str) -> int:
    """Mark ``started`` executions of a run that is no longer executing as ``unknown``; return how many.

    Use only when the process that ran them is gone (expired lease, cancelled task):
    their side effect may or may not have happened, and nothing re-runs them on its own
    (000, "unknown side-effecting tool outcome").
    """
    return ToolExecution.objects.filter(run_id=run_id, status=ToolExecutionStatus.STARTED).update(
        status=ToolExecutionStatus.UNKNOWN, finished_at=timezone.now()
    )


def settle_superseded_tool_executions(run_id: str, outcomes: dict[str, tuple[str, Any, str]]) -> int:
    """Record how a later entry finished the pending calls of the run it superseded; return how many.

    ``outcomes``: ``{tool_call_id: (status, result, error_code)}``. Only calls still
    ``awaiting_client`` / ``awaiting_approval`` / ``approved`` (never run) of a
    ``superseded`` run change (002, "Tool
    results for a call in an earlier message": the new entry finishes the calls it consumed
    or abandoned). Not fenced on the session: the superseding run holds it now.
    """
    now = timezone.now()
    pending = ToolExecution.objects.filter(
        run_id=run_id,
        run__status=RunStatus.SUPERSEDED,
        status__in=[
            ToolExecutionStatus.AWAITING_CLIENT,
            ToolExecutionStatus.AWAITING_APPROVAL,
            ToolExecutionStatus.APPROVED,
        ],
    )
    settled = 0
    with transaction.atomic(using=reads.write_alias()):
        for call_id, (status, result, error_code) in outcomes.items():
            settled += pending.filter(tool_call_id=call_id).update(
                status=status, result=result, error_code=error_code, finished_at=now
            )
    return settled


asave_tool_execution = sync_to_async(save_tool_execution)
afinish_tool_execution = sync_to_async(finish_tool_execution)
aanswer_tool_execution = sync_to_async(answer_tool_execution)
afind_tool_executions = sync_to_async(find_tool_executions)
alist_tool_executions = sync_to_async(list_tool_executions)
alist_turn_tool_executions = sync_to_async(list_turn_tool_executions)
aturn_run_ids = sync_to_async(turn_run_ids)
amark_started_tool_executions_unknown = sync_to_async(mark_started_tool_executions_unknown)
asettle_superseded_tool_executions = sync_to_async(settle_superseded_tool_executions)
