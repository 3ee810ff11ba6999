"""Staff recovery actions on one run (000, "Recovery actions should reflect certainty").

Each action first checks :func:`~helix_django.recovery.inventory.inventory` and raises
RunNotActionableError (``cause`` = the action) when it does not apply. The names say what
happens:

- **Check status** (``check_status``): ask the provider about the run's operation by id;
  complete the run from the provider's output when it finished (reconcile, no inference);
  on a cancelled run whose provider cancel answer was unclear, ask again and cancel an
  operation still running (outcome ``cancel_<answer>``; the run stays cancelled);
- **Mark interrupted**: end a stuck run as interrupted, partial output kept;
- **Cancel**: end the run cancelled and ask the provider to stop its operation;
- **Regenerate**: a new attempt at the turn from the last safe checkpoint (new inference);
- **Continue**: a new run that continues from the partial output / continuation state
  (new inference, shown as a new generation, never as a resume);
- **Keep partial** / **Discard partial**: keep the partial text as a partial assistant
  message, or remove it from the conversation (archived, still auditable).

Only Regenerate and Continue start inference, through the executor the caller passes
(``executor=``: the admin and the API pass ``helix_django.runtime.executor.get_executor()``;
recovery sits below the runtime and never imports it). Nothing
here re-runs a tool. Every action emits ``recovery.action`` and ``recovery.outcome``
telemetry and the ``recovery_action_taken`` signal.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Protocol

from django.utils.translation import gettext_lazy

from helix_django import store, telemetry
from helix_django.errors import (
    RunNotActionableError,
    RunNotFoundError,
    RunSupersededError,
    ValidationError,
)
from helix_django.jsonbody import ensure_storable
from helix_django.limits import check_tool_result_size
from helix_django.models import CancelledBy, ChatSession, Checkpoint, Run, RunStatus, ToolExecution, ToolExecutionStatus
from helix_django.models.run import SCANNED_STATUSES
from helix_django.orm import sync_to_async
from helix_django.recovery import inventory as inv
from helix_django.recovery.cancels import arecheck_cancel
from helix_django.recovery.follow import aend_from_operation
from helix_django.recovery.provider import aquery_operation
from helix_django.recovery.scan import SCAN_OWNER, arecover_run
from helix_django.signals import recovery_action_taken


@dataclasses.dataclass(frozen=True)
class ActionResult:
    """What an action did: ``outcome`` is a short code, ``new_run_id`` the run it started (if any)."""

    action: str
    run_id: str
    outcome: str
    new_run_id: str = ""


async def _load(run_id: str, action: str) -> Run:
    run = await Run.objects.filter(pk=run_id).afirst()
    if run is None:
        raise RunNotFoundError()
    offer = (await sync_to_async(inv.inventory)(run))[action]
    if not offer.is_available:
        raise RunNotActionableError(offer.reason, cause=action)
    return run


class RunStarter(Protocol):
    """What the Cancel, Regenerate and Continue actions need of the executor (the caller's)."""

    async def cancel(self, *, session: ChatSession, run_id: str, by: str = ...) -> Run:
        """Cancel a live run; return it as it ended."""

    async def regenerate(self, *, session: ChatSession) -> Any:
        """Start a new attempt of the session's latest turn; return its handle (``.run_id``)."""

    async def continue_run(self, *, session: ChatSession, run_id: str) -> Any:
        """Start a run continuing ``run_id``'s partial answer; return its handle (``.run_id``)."""

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:
        """Wait for a run executing in this process to end; return its status (None if not local)."""


def _needs(executor: RunStarter | None, action: str) -> RunStarter:
    if executor is None:
        raise TypeError(f"the recovery action {action!r} needs executor= (the runtime's get_executor())")
    return executor


async def _check_status(run: Run, executor: Any = None) -> tuple[str, str]:
    if run.status == RunStatus.CANCELLED:
        # It stays cancelled: only the provider's word on its operation is asked again.
        answer = await arecheck_cancel(run)
        return (f"cancel_{answer}" if answer else "changed_meanwhile"), ""
    if run.status in SCANNED_STATUSES:
        # A live run's operation still running goes on as the same run with the caller's executor.
        decision = await arecover_run(run.id, force=True, executor=executor)
        return decision.outcome, ""
    if not await store.atransition_run(
        run.id, frozenset({run.status}), RunStatus.RECOVERING, lease_owner=SCAN_OWNER(), lease_seconds=60
    ):
        raise RunNotActionableError(cause="check_status")
    recovering = await Run.objects.aget(pk=run.id)
    query = await aquery_operation(recovering)
    try:
        return await aend_from_operation(recovering, query, stage=run.interrupted_stage or "recovering"), ""
    except RunSupersededError:
        # Cancelled (or otherwise ended) while the provider was being asked: that decision stands.
        return "changed_meanwhile", ""


async def _cancel(run: Run, executor: RunStarter) -> tuple[str, str]:
    """Staff's Cancel of a live run (the inventory offers it for no other): recorded as ``cancelled_by=staff``."""
    # The executor stops a run it executes here, or ends one executed elsewhere.
    session = await ChatSession.objects.aget(pk=run.session_id)
    try:
        ended = await executor.cancel(session=session, run_id=run.id, by=CancelledBy.STAFF)
    except RunNotActionableError:  # it ended between the inventory and the cancel
        return "changed_meanwhile", ""
    return ("cancelled" if ended.status == RunStatus.CANCELLED else "changed_meanwhile"), ""


async def _start(run: Run, action: str, wait_seconds: float | None, executor: RunStarter) -> tuple[str, str]:
    session = await ChatSession.objects.aget(pk=run.session_id)
    if action == inv.REGENERATE:
        handle = await executor.regenerate(session=session)
    else:
        handle = await executor.continue_run(session=session, run_id=run.id)
    if wait_seconds is None:
        return "started", handle.run_id
    try:
        status = await executor.wait(handle.run_id, timeout=wait_seconds)
    except TimeoutError:
        return "started", handle.run_id
    return f"started:{status}" if status else "started", handle.run_id


async def _claim_partial_decision(run: Run, action: str) -> None:
    """Take the keep/discard decision once: a second submit that passed the inventory meanwhile is refused."""
    if not await store.aclaim_partial_decision(run.id, action):
        raise RunNotActionableError(gettext_lazy("This decision was already taken."), cause=action)


async def aperform(
    action: str,
    run_id: str,
    *,
    executor: RunStarter | None = None,
    actor_id: int | None = None,
    wait_seconds: float | None = None,
) -> ActionResult:
    """Perform recovery ``action`` (one of :data:`~helix_django.recovery.inventory.ACTIONS`) on a run.

    ``executor``: what starts and cancels runs (the runtime's ``get_executor()``); Cancel,
    Regenerate and Continue raise TypeError without it. Check status of a live run whose
    operation still runs re-attaches it with it (outcome ``reattached``), follows it without. ``wait_seconds``: for
    Regenerate/Continue from a sync caller (whose event loop ends when the call returns),
    wait up to that long for the new run to end; the outcome is then ``started:<status>``.
    A run still going after the wait is left to its lease and the scan.

    Raises RunNotFoundError, RunNotActionableError (with the reason people see) and, for
    Regenerate/Continue, the executor's typed errors.
    """
    if action not in inv.ACTIONS:
        raise RunNotActionableError(cause="unknown_action")
    if action in (inv.CANCEL, inv.REGENERATE, inv.CONTINUE):
        executor = _needs(executor, action)
    run = await _load(run_id, action)
    started = time.monotonic()
    telemetry.emit("recovery.action", **telemetry.run_fields(run), action=action, actor_id=actor_id)
    new_run_id = ""
    if action == inv.CHECK_STATUS:
        outcome, _ = await _check_status(run, executor)
    elif action == inv.MARK_INTERRUPTED:
        outcome = (await arecover_run(run.id, force=True, query_provider=False)).outcome
    elif action == inv.CANCEL:
        assert executor is not None
        outcome, _ = await _cancel(run, executor)
    elif action in (inv.REGENERATE, inv.CONTINUE):
        assert executor is not None
        outcome, new_run_id = await _start(run, action, wait_seconds, executor)
    elif action == inv.KEEP_PARTIAL:
        await _claim_partial_decision(run, action)
        outcome = "kept"
    else:
        await _claim_partial_decision(run, action)
        head = (await sync_to_async(_head)(run)) or run.start_sequence
        await store.aarchive_response(run.id, stream_sequence=head)
        await store.arecord_recovery(run.id, is_continuation_valid=False)
        outcome = "discarded"
    await store.arecord_recovery(run.id, recovery_action=action)
    ended = await Run.objects.aget(pk=run.id)
    await recovery_action_taken.asend(sender=Run, run=ended, action=action, outcome=outcome)
    telemetry.emit(
        "recovery.outcome",
        **telemetry.run_fields(ended),
        action=action,
        outcome=outcome,
        new_run_id=new_run_id,
        actor_id=actor_id,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
    return ActionResult(action, run.id, outcome, new_run_id)


def _head(run: Run) -> int:
    return (
        Checkpoint.objects.filter(session_id=run.session_id)
        .order_by("-id")
        .values_list("stream_sequence", flat=True)
        .first()
        or 0
    )


def check_tool_result(result: Any) -> None:
    """Refuse a tool ``result`` that no tool could return: one a database cannot store, or too large.

    Raises ValidationError (400, ``cause: "nul_character"`` with ``field``, or ``"json"``
    for a lone surrogate) and PayloadTooLargeError (413, ``cause: "tool_result"``,
    ``limitBytes``, ``sizeBytes``) for a result over ``MAX_TOOL_RESULT_BYTES``.
    """
    try:
        text = json.dumps(result)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(gettext_lazy("The tool result is not JSON"), cause="json") from exc
    ensure_storable(result, text)
    check_tool_result_size(result, gettext_lazy("The tool result is larger than the limit (MAX_TOOL_RESULT_BYTES)"))


async def aresolve_tool(execution_id: int, *, executed: bool, result: Any = None, actor_id: int | None = None) -> None:
    """Resolve a tool execution whose outcome is ``unknown`` (000, "Reconcile before retrying unknown side effects").

    ``executed=True`` records that it ran, with its JSON ``result`` (Continue/Regenerate then
    reuse it instead of running the tool again); ``executed=False`` records that it did not
    run (``failed``, error code ``not_executed``). Raises RunNotActionableError
    (``cause: tool_not_unknown``) when the execution is not ``unknown``. ``result`` is held
    to the rules of any tool result (:func:`check_tool_result`); nothing is written when it
    fails them.
    """
    if executed:
        check_tool_result(result)
    execution = await ToolExecution.objects.select_related("run").filter(pk=execution_id).afirst()
    if execution is None:
        raise RunNotActionableError(cause="tool_not_unknown")
    status = ToolExecutionStatus.SUCCEEDED if executed else ToolExecutionStatus.FAILED
    await store.aresolve_tool_execution(
        execution_id, status=status, result=result if executed else None, error_code="" if executed else "not_executed"
    )
    telemetry.emit(
        "recovery.outcome",
        **telemetry.run_fields(execution.run),
        action="resolve_tool",
        outcome="executed" if executed else "not_executed",
        actor_id=actor_id,
    )
