"""The state store: the only code that writes sessions, runs, messages and checkpoints.

Every commit writes its message rows and its checkpoint in one transaction, so they
always agree (002, "Snapshots"). Every write of a run is fenced on its run id: once a
newer run superseded it (or it ended), its writes raise RunSupersededError and change
nothing (002, "Superseded runs"). Functions are synchronous; the ``a``-prefixed twins
run them in the ORM's thread for async callers.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils import timezone

from helix_django.errors import (
    AlreadyRunningError,
    HelixError,
    RunNotActionableError,
    RunNotFoundError,
    RunStartConflictError,
    RunSupersededError,
    SessionNotFoundError,
)
from helix_django.ids import new_id
from helix_django.models import (
    LIVE_STATUSES,
    ChatSession,
    Checkpoint,
    CheckpointKind,
    Message,
    Run,
    RunStatus,
    ToolExecution,
    ToolExecutionStatus,
)

#: Statuses a terminal commit may write.
TERMINAL_COMMIT_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}
)
_UNSET: Any = object()


@dataclasses.dataclass
class RunStartRequest:
    """Everything the run-start commit writes (000, "Persist the turn before starting inference").

    ``input_messages`` are UIMessages appended after the committed rows; an input whose id
    is already an active row replaces that row (a ``tool_result`` continuation sends the
    assistant message it continues, which then also becomes the response message).
    ``truncate_to`` rewinds the conversation to that many rows first (a ``truncate``
    checkpoint). ``expected_current_run_id`` is the compare-and-set on the session's current run (``_UNSET`` skips it).
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


@dataclasses.dataclass(frozen=True)
class RunStartResult:
    """The run created by a run-start commit, its checkpoint, and the runs it superseded."""

    run: Run
    checkpoint: Checkpoint
    truncate_checkpoint: Checkpoint | None
    superseded_run_ids: list[str]


def _lock_session(session_id: str) -> ChatSession:
    session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        raise SessionNotFoundError()
    return session


def _fenced_run(run_id: str) -> tuple[ChatSession, Run]:
    """Lock the run's session and return (session, run) if the run may still write."""
    run = Run.objects.filter(pk=run_id).only("session_id").first()
    if run is None:
        raise RunNotFoundError()
    session = _lock_session(run.session_id)
    run = Run.objects.get(pk=run_id)
    if session.current_run_id != run_id or run.status not in LIVE_STATUSES:
        raise RunSupersededError()
    return session, run


def _write_message(
    session: ChatSession, position: int, ui_message: dict[str, Any], *, run: Run | None, checkpoint_id: int
) -> Message:
    """Insert or replace the active row at ``position``."""
    fields = {
        "ui_id": ui_message["id"],
        "role": ui_message["role"],
        "parts": ui_message.get("parts", []),
        "metadata": ui_message.get("metadata") or {},
        "run": run,
        "checkpoint_id": checkpoint_id,
    }
    updated = Message.objects.filter(session=session, position=position).update(**fields)
    if updated:
        return Message(session=session, position=position, **fields)
    return Message.objects.create(session=session, position=position, **fields)


def _checkpoint(session: ChatSession, run: Run | None, kind: str, message_count: int, sequence: int, step_count: int):
    return Checkpoint.objects.create(
        session=session,
        run=run,
        kind=kind,
        message_count=message_count,
        stream_sequence=sequence,
        step_count=step_count,
        state=session.state,
    )


def get_or_create_session(
    session_id: str, *, owner_id: int | None = None, anonymous_key: str = "", agent: str = "default"
) -> tuple[ChatSession, bool]:
    """Return ``(session, created)``; a new session belongs to ``owner_id`` or ``anonymous_key``.

    Ownership is checked by callers (another owner's session is "not found" to them).
    """
    try:
        with transaction.atomic():
            return ChatSession.objects.get_or_create(
                pk=session_id, defaults={"owner_id": owner_id, "anonymous_key": anonymous_key, "agent": agent}
            )
    except IntegrityError:
        return ChatSession.objects.get(pk=session_id), False


def start_run(request: RunStartRequest) -> RunStartResult:
    """Do the run-start commit: input rows, the Run and a ``run_start`` checkpoint, atomically.

    A compare-and-set on the session's current run. Raises SessionNotFoundError,
    RunStartConflictError (``cause: expected_mismatch``) when the current run moved,
    AlreadyRunningError when a run is live and ``supersede_live`` is false. Every other
    live run of the session is superseded. The run id doubles as the stream claim's owner;
    the run-start checkpoint's id is its claim epoch.
    """
    now = timezone.now()
    with transaction.atomic():
        session = _lock_session(request.session_id)
        if request.expected_current_run_id is not _UNSET and session.current_run_id != request.expected_current_run_id:
            raise RunStartConflictError(cause="expected_mismatch")
        live = list(Run.objects.filter(session=session, status__in=LIVE_STATUSES).values_list("id", flat=True))
        if live and not request.supersede_live:
            raise AlreadyRunningError()
        if live:
            Run.objects.filter(pk__in=live).update(status=RunStatus.SUPERSEDED, finished_at=now)
        count = session.message_count
        truncate_cp = None
        if request.truncate_to is not None and request.truncate_to < count:
            Message.objects.filter(session=session, position__gte=request.truncate_to).update(
                position=None, archived_at=now
            )
            count = request.truncate_to
            session.message_count = count
            truncate_cp = _checkpoint(session, None, CheckpointKind.TRUNCATE, count, request.stream_sequence, 0)
        inputs = list(request.input_messages)
        known = dict(
            Message.objects.filter(
                session=session, position__isnull=False, ui_id__in=[m.get("id") for m in inputs]
            ).values_list("ui_id", "position")
        )
        positions = []
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
        run = Run.objects.create(
            id=new_id("run"),
            session=session,
            status=RunStatus.STARTING,
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
        cp = _checkpoint(session, run, CheckpointKind.RUN_START, message_count, request.stream_sequence, 0)
        for position, message in zip(positions, inputs, strict=True):
            _write_message(session, position, message, run=run, checkpoint_id=cp.id)
        session.current_run = run
        session.message_count = message_count
        session.save(update_fields=["current_run", "message_count", "updated_at"])
    return RunStartResult(run=run, checkpoint=cp, truncate_checkpoint=truncate_cp, superseded_run_ids=live)


def commit_step(
    run_id: str,
    *,
    response_message: dict[str, Any],
    stream_sequence: int,
    step_count: int,
    state: dict[str, Any] | None = None,
) -> Checkpoint:
    """Commit a finished step: the response message so far, the state, a ``step`` checkpoint.

    ``response_message`` is a UIMessage ``{id, role, parts, metadata}``. Raises
    RunSupersededError when the run no longer holds its session (nothing is written).
    """
    with transaction.atomic():
        session, run = _fenced_run(run_id)
        if state is not None:
            session.state = state
        count = run.start_message_count + 1
        cp = _checkpoint(session, run, CheckpointKind.STEP, count, stream_sequence, step_count)
        _write_message(session, run.start_message_count, response_message, run=run, checkpoint_id=cp.id)
        session.message_count = count
        session.save(update_fields=["state", "message_count", "updated_at"])
        Run.objects.filter(pk=run_id).update(step_count=step_count, last_event_at=timezone.now())
    return cp


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
) -> Checkpoint:
    """End the run with ``status`` (completed / failed / cancelled / interrupted) and a ``terminal`` checkpoint.

    The response message, when it has parts, is written with metadata
    ``helix = {runId, status, partial}``; for any status but completed it is marked
    partial and never shown as a finished answer (000, "Store partial output
    explicitly"). ``error`` is kept scrubbed (code, category, retryable, fixed message).
    ``allow_terminal_from`` lets recovery end a run already in one of those statuses.
    Raises RunSupersededError when the run no longer holds its session.
    """
    if status not in TERMINAL_COMMIT_STATUSES:
        raise ValueError(f"not a terminal status: {status}")
    now = timezone.now()
    with transaction.atomic():
        try:
            session, run = _fenced_run(run_id)
        except RunSupersededError:
            run = Run.objects.filter(pk=run_id).first()
            if run is None or run.status not in allow_terminal_from:
                raise
            session = _lock_session(run.session_id)
            if session.current_run_id != run_id:
                raise
        if state is not None:
            session.state = state
        count = run.start_message_count
        parts = (response_message or {}).get("parts") or []
        partial_chars = sum(len(p.get("text", "")) for p in parts if p.get("type") in ("text", "reasoning"))
        if parts:
            count += 1
        cp = _checkpoint(session, run, CheckpointKind.TERMINAL, count, stream_sequence, step_count or run.step_count)
        if parts:
            assert response_message is not None
            metadata = dict(response_message.get("metadata") or {})
            metadata["helix"] = {"runId": run.id, "status": status, "partial": status != RunStatus.COMPLETED}
            _write_message(
                session,
                run.start_message_count,
                {**response_message, "metadata": metadata},
                run=run,
                checkpoint_id=cp.id,
            )
        session.message_count = count
        session.save(update_fields=["state", "message_count", "updated_at"])
        fields: dict[str, Any] = {
            "status": status,
            "finished_at": now,
            "last_event_at": now,
            "lease_owner": "",
            "lease_expires_at": None,
            "partial_chars": partial_chars if status != RunStatus.COMPLETED else 0,
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
            )
        Run.objects.filter(pk=run_id).update(**fields)
    return cp


def update_run(run_id: str, **fields: Any) -> None:
    """Set fields of a live run (status transitions, provider operation id, continuation).

    Fenced: raises RunSupersededError when the run no longer holds its session.
    Always refreshes ``last_event_at``.
    """
    with transaction.atomic():
        _fenced_run(run_id)
        fields.setdefault("last_event_at", timezone.now())
        Run.objects.filter(pk=run_id).update(**fields)


def renew_lease(run_id: str, owner: str, seconds: int) -> bool:
    """Extend the lease of ``owner`` on a live run by ``seconds``; False if it lost the run."""
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=owner, status__in=LIVE_STATUSES).update(
            lease_expires_at=now + timedelta(seconds=seconds)
        )
    )


def claim_lease(run_id: str, owner: str, seconds: int) -> bool:
    """Take the lease of a live run if it is free or expired (compare-and-set); True if taken."""
    now = timezone.now()
    from django.db.models import Q

    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_owner=owner)
    return bool(
        Run.objects.filter(free, pk=run_id, status__in=LIVE_STATUSES).update(
            lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds), last_event_at=now
        )
    )


def take_over_lease(run_id: str, from_owner: str, owner: str, seconds: int) -> bool:
    """Move a live run's lease from ``from_owner`` to ``owner`` (compare-and-set); True if taken.

    The hand-off of a run to a task worker: of several workers given the same run, only
    the first takes it. False when the lease moved on (another worker, the relaunch scan)
    or the run is no longer live.
    """
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, lease_owner=from_owner, status__in=LIVE_STATUSES).update(
            lease_owner=owner, lease_expires_at=now + timedelta(seconds=seconds), last_event_at=now
        )
    )


#: Run fields a recovery may set on a run in any status (never its status or fence).
RECOVERY_FIELDS = frozenset(
    {"recovery_action", "is_continuation_valid", "provider_cancel_result", "cancel_requested_at", "interrupted_stage"}
)


def record_recovery(run_id: str, **fields: Any) -> None:
    """Set recovery bookkeeping (:data:`RECOVERY_FIELDS`) on a run in any status (000, "Recovery actions").

    Raises RunNotFoundError for an unknown run, ValueError for any other field.
    """
    if set(fields) - RECOVERY_FIELDS:
        raise ValueError(f"not a recovery field: {sorted(set(fields) - RECOVERY_FIELDS)}")
    if not Run.objects.filter(pk=run_id).update(**fields):
        raise RunNotFoundError()


def transition_run(
    run_id: str, from_statuses: frozenset[str], status: str, *, lease_owner: str = "", lease_seconds: int = 30
) -> bool:
    """Move the session's current run from one of ``from_statuses`` to ``status`` (compare-and-set).

    Used by recovery (``interrupted`` -> ``recovering`` while it checks a provider
    operation); takes the lease for ``lease_owner``. Returns False, changing nothing, when
    the run is in another status or no longer its session's current run.
    """
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.filter(pk=run_id).only("session_id").first()
        if run is None:
            raise RunNotFoundError()
        session = _lock_session(run.session_id)
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
    with transaction.atomic():
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise RunNotFoundError()
        session = _lock_session(run.session_id)
        if session.current_run_id != run_id or run.status in LIVE_STATUSES:
            raise RunNotActionableError(cause="not_current_terminal_run")
        count = run.start_message_count
        Message.objects.filter(session=session, position__gte=count).update(position=None, archived_at=now)
        session.message_count = count
        cp = _checkpoint(session, None, CheckpointKind.TRUNCATE, count, stream_sequence, 0)
        session.save(update_fields=["message_count", "updated_at"])
    return cp


def resolve_tool_execution(execution_id: int, *, status: str, result: Any = None, error_code: str = "") -> None:
    """Record staff's resolution of a tool execution whose outcome was ``unknown``.

    ``status`` is ``succeeded`` (it ran; ``result`` is its JSON result) or ``failed``
    (``error_code`` says why, e.g. ``not_executed``). Raises RunNotActionableError
    (``cause: tool_not_unknown``) when the execution is not ``unknown``.
    """
    from helix_django.models import ToolExecution, ToolExecutionStatus

    if status not in (ToolExecutionStatus.SUCCEEDED, ToolExecutionStatus.FAILED):
        raise ValueError(f"not a resolution status: {status}")
    updated = ToolExecution.objects.filter(pk=execution_id, status=ToolExecutionStatus.UNKNOWN).update(
        status=status, result=result, error_code=error_code, finished_at=timezone.now()
    )
    if not updated:
        raise RunNotActionableError(cause="tool_not_unknown")


def discard_empty_session(session_id: str) -> bool:
    """Delete the session if nothing was ever written to it (no run, no message); True if deleted.

    Check and delete happen under the session's row lock, the lock every run-start commit
    takes, so a racing send that starts a run in the session keeps it.
    """
    with transaction.atomic():
        session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.current_run_id or session.message_count:
            return False
        if Run.objects.filter(session=session).exists() or Message.objects.filter(session=session).exists():
            return False
        session.delete()
        return True


def delete_session(session_id: str) -> None:
    """Delete a session with its messages, runs and checkpoints (cascade)."""
    ChatSession.objects.filter(pk=session_id).delete()


# --- tool executions (written through helix_django.runtime.tools) ------------------------

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
    with transaction.atomic():
        _, run = _fenced_run(run_id)
        execution, _created = ToolExecution.objects.update_or_create(
            run=run, tool_call_id=fields["tool_call_id"], defaults=values
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
    from helix_django.errors import InvalidToolResultError

    allowed = {
        ToolExecutionStatus.AWAITING_CLIENT: {ToolExecutionStatus.SUCCEEDED, ToolExecutionStatus.FAILED},
        ToolExecutionStatus.AWAITING_APPROVAL: {ToolExecutionStatus.APPROVED, ToolExecutionStatus.DENIED},
    }
    now = timezone.now()
    with transaction.atomic():
        _fenced_run(run_id)
        execution = ToolExecution.objects.select_for_update().filter(run_id=run_id, tool_call_id=tool_call_id).first()
        if execution is None:
            raise RunNotFoundError("Tool call not found", cause="tool_call_unknown")
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


aget_or_create_session = sync_to_async(get_or_create_session)
astart_run = sync_to_async(start_run)
acommit_step = sync_to_async(commit_step)
acommit_terminal = sync_to_async(commit_terminal)
aupdate_run = sync_to_async(update_run)
arenew_lease = sync_to_async(renew_lease)
aclaim_lease = sync_to_async(claim_lease)
atake_over_lease = sync_to_async(take_over_lease)
arecord_recovery = sync_to_async(record_recovery)
atransition_run = sync_to_async(transition_run)
aarchive_response = sync_to_async(archive_response)
aresolve_tool_execution = sync_to_async(resolve_tool_execution)
asave_tool_execution = sync_to_async(save_tool_execution)
afinish_tool_execution = sync_to_async(finish_tool_execution)
aanswer_tool_execution = sync_to_async(answer_tool_execution)
afind_tool_executions = sync_to_async(find_tool_executions)
alist_tool_executions = sync_to_async(list_tool_executions)
amark_started_tool_executions_unknown = sync_to_async(mark_started_tool_executions_unknown)
