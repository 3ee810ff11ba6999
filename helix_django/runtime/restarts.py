"""Regenerate and Continue: new runs for an interrupted turn.

000, "Resume, continue, regenerate, and reconcile are different":

``regenerate`` starts a new attempt of the turn from the last safe checkpoint (a rewind,
announced by one ``data-stream-resync`` with reason ``retry``, to the user message plus the
turn's completed side effects, :mod:`.kept_steps`); the earlier attempt stays auditable.
Both first cancel a provider operation the ended run may have left generating, so no redo
runs beside it. ``continue_run`` starts a new run that re-opens the partial answer and asks
the model to go on. Neither re-runs a side effect: persisted tool results are reused,
calls without a recorded outcome are reported as unknown, never repeated.
"""

from __future__ import annotations

from typing import Any

from helix_django import store
from helix_django.errors import AlreadyRunningError, RunNotActionableError
from helix_django.models import ChatSession, Run, RunStatus, ToolExecutionStatus
from helix_django.recovery.provider import acancel_operation
from helix_django.runtime import guards
from helix_django.runtime import requests as rq
from helix_django.runtime.entries import acurrent_run, aget_run, typed
from helix_django.runtime.handles import Launch, RunHandle
from helix_django.runtime.kept_steps import akept_steps
from helix_django.runtime.retirement import aretire_if_dead
from helix_django.runtime.starts import RunStarts
from helix_django.runtime.tool_calls import UNKNOWN_OUTCOME_TEXT

NO_RESULT_TEXT = "This tool call has no recorded result"


@typed
async def regenerate(
    starts: RunStarts,
    *,
    session: ChatSession,
    request_key: str | None = None,
    user: Any = None,
    supersede_live: bool = False,
) -> RunHandle:
    """Run the session's latest turn again as a new attempt; the earlier attempt stays auditable.

    Rewinds to the turn's user message (a ``truncate`` checkpoint) and writes one
    ``data-stream-resync`` (reason ``retry``); the new response message then opens with the
    turn's completed side-effecting tool steps (000, "Keep a last-safe context checkpoint":
    the model sees the calls and their results, none runs again). Raises AlreadyRunningError while a run
    executes (unless ``supersede_live``), RunNotActionableError without a user turn.
    """
    run = await acurrent_run(session.id)
    supersede = supersede_live or (run is not None and run.status == RunStatus.SUSPENDED_CLIENT_TOOL)
    if run is not None and run.is_live and not supersede and not await aretire_if_dead(run, starts):
        raise AlreadyRunningError()
    turn_id = run.turn_message_id if run is not None else ""
    position = await rq.auser_position(session.id, turn_id)
    if position is None:
        raise RunNotActionableError(cause="no_user_turn")
    if not turn_id:
        turn_id = await rq.auser_id(session.id, position)
    digest = rq.input_hash("regenerate", turn_id)
    if request_key:
        duplicate = await rq.akeyed_duplicate(starts.runs, session, request_key, digest)
        if duplicate is not None:
            return duplicate
    request = store.RunStartRequest(
        session_id=session.id,
        kind="regenerate",
        truncate_to=position + 1,
        turn_message_id=turn_id,
        attempt=await rq.anext_attempt(session.id, turn_id),
        request_key=request_key or None,
        input_hash=digest,
        expected_current_run_id=run.id if run is not None else None,
        supersede_live=supersede,
    )

    if run is not None:
        await _stop_left_operation(run)
    await guards.aask_tools(request)  # before the kept steps are read: a tool's answer may keep one
    kept = await akept_steps(session.id, turn_id)

    def resync(result: store.RunStartResult) -> list[dict[str, Any]]:
        data = {
            "checkpointId": result.checkpoint.id,
            "stepCount": 0,
            "messageCount": result.checkpoint.message_count,
            "fromSequence": result.run.start_sequence,
            "reason": "retry",
            "runId": result.run.id,
            "truncateCheckpointId": result.truncate_checkpoint.id if result.truncate_checkpoint else None,
        }
        return [{"type": "data-stream-resync", "data": data}, *kept]

    return await starts.launch(session, Launch(request, resync, tools_asked=True), user=user)


@typed
async def continue_run(starts: RunStarts, *, session: ChatSession, run_id: str, user: Any = None) -> RunHandle:
    """Start a new run that continues the partial answer of an interrupted/failed/cancelled run ("Continue").

    Persisted tool results are sent to the model, never re-executed; calls without a
    recorded outcome are reported as unknown. Raises RunNotFoundError,
    AlreadyRunningError (the run still executes), RunNotActionableError.
    """
    run = await aget_run(session.id, run_id)
    current = await acurrent_run(session.id)
    if current is None or current.id != run.id:
        raise RunNotActionableError(cause="not_latest_run")
    if run.is_live:
        if run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
            raise RunNotActionableError(cause="run_suspended")
        if not await aretire_if_dead(run, starts):
            raise AlreadyRunningError()
        run = await aget_run(session.id, run_id)
    if run.status not in (RunStatus.INTERRUPTED, RunStatus.FAILED, RunStatus.CANCELLED):
        raise RunNotActionableError(cause="run_not_interrupted")
    if not run.is_continuation_valid:
        # The history before it was edited: its continuation state no longer matches (000,
        # "Editing history invalidates some recovery paths"). Regenerate instead.
        raise RunNotActionableError(cause="continuation_invalid")
    await store.amark_started_tool_executions_unknown(run.id)
    await _stop_left_operation(run)
    row = await rq.aload_response_row(session.id, run.start_message_count, run.response_message_id)
    request = store.RunStartRequest(
        session_id=session.id,
        kind="continue",
        input_messages=[row] if row else [],
        turn_message_id=run.turn_message_id,
        attempt=await rq.anext_attempt(session.id, run.turn_message_id),
        expected_current_run_id=run.id,
    )
    await guards.aask_tools(request)  # before the open calls read their outcomes
    chunks = await _settle_open_calls(row, run)
    launch = Launch(
        request,
        lambda _r: chunks,
        parts=row["parts"] if row else None,
        metadata=row["metadata"] if row else None,
        add_continue_instruction=True,
        tools_asked=True,
    )
    return await starts.launch(session, launch, user=user)


async def _stop_left_operation(run: Run) -> None:
    """Cancel the provider operation an interrupted or failed run may have left generating, before a redo
    starts beside it (a completed or cancelled run's operation has ended)."""
    if run.status in (RunStatus.INTERRUPTED, RunStatus.FAILED):
        await acancel_operation(run)


async def _settle_open_calls(row: dict[str, Any] | None, run: Run) -> list[dict[str, Any]]:
    """Chunks giving every open tool call of ``row`` its persisted outcome (never re-executing it)."""
    if row is None:
        return []
    executions = {e.tool_call_id: e for e in await store.alist_tool_executions(run_id=run.id)}
    chunks: list[dict[str, Any]] = []
    for part in row["parts"]:
        if part.get("state") not in ("input-available", "approval-requested") or "toolCallId" not in part:
            continue
        call_id = part["toolCallId"]
        execution = executions.get(call_id)
        if execution is not None and execution.status == ToolExecutionStatus.SUCCEEDED:
            chunks.append({"type": "tool-output-available", "toolCallId": call_id, "output": execution.result})
            continue
        text = NO_RESULT_TEXT
        if execution is not None and execution.status == ToolExecutionStatus.UNKNOWN:
            text = UNKNOWN_OUTCOME_TEXT
        elif execution is not None and execution.status == ToolExecutionStatus.FAILED:
            text = "The tool failed"
        chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": text})
    return chunks
