"""Client-tool results and approval answers: stored, then the suspended run continues once its batch is complete."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.errors import (
    InvalidToolResultError,
    MessageTooLargeError,
    RunNotActionableError,
    RunSupersededError,
    ValidationError,
)
from helix_django.limits import ENDING_RESERVE_BYTES, json_size
from helix_django.models import ChatSession, Run, RunStatus, ToolExecutionStatus
from helix_django.runtime import requests as rq
from helix_django.runtime.agents import get_agent
from helix_django.runtime.entries import acurrent_run, aget_run, typed
from helix_django.runtime.handles import Launch, RunHandle
from helix_django.runtime.starts import RunStarts
from helix_django.streams import get_stream_manager


@typed
async def submit_tool_results(
    starts: RunStarts, *, session: ChatSession, run_id: str, results: list[dict[str, Any]], user: Any = None
) -> RunHandle | None:
    """Store browser results / approval answers of a suspended run; continue it once the batch is complete.

    ``results``: ``[{"toolCallId", "output"} | {"toolCallId", "errorText"} | {"toolCallId", "approved"}]``.
    Returns None while calls of the batch are still unanswered. Raises
    RunSupersededError (late submit), InvalidToolResultError, RunNotActionableError.
    """
    run = await aget_run(session.id, run_id)
    if run.status == RunStatus.SUPERSEDED:
        raise RunSupersededError()
    if run.status != RunStatus.SUSPENDED_CLIENT_TOOL:
        raise RunNotActionableError(cause="run_not_suspended")
    known = {e.tool_call_id: e for e in await store.alist_tool_executions(run_id=run.id)}
    answers = [_answer(result) for result in (results if isinstance(results, list) else [None])]
    await _check_room_for_answers(session, run, answers)
    for call_id, status, value, code in answers:  # all validated before any is stored
        execution = known.get(call_id)
        if execution is not None and execution.status == status:
            continue  # a repeated submit of the same answer
        await store.aanswer_tool_execution(run.id, call_id, status=status, result=value, error_code=code)
    if await rq.apending_tool_executions(run.id):
        return None
    return await _continue_after_tools(starts, session, run, user)


async def _continue_after_tools(starts: RunStarts, session: ChatSession, run: Run, user: Any) -> RunHandle:
    row = await rq.aload_response_row(session.id, run.start_message_count, run.response_message_id)
    if row is None:
        raise RunNotActionableError(cause="response_message_missing")
    agent = get_agent(session.agent)
    waiting = {
        p["toolCallId"]
        for p in row["parts"]
        if p.get("state") in ("input-available", "approval-requested") and "toolCallId" in p
    }
    chunks: list[dict[str, Any]] = []
    approved = []
    for execution in await store.alist_tool_executions(run_id=run.id):
        call_id = execution.tool_call_id
        if call_id not in waiting:
            continue
        if execution.status == ToolExecutionStatus.SUCCEEDED:
            chunks.append({"type": "tool-output-available", "toolCallId": call_id, "output": execution.result})
        elif execution.status == ToolExecutionStatus.FAILED:
            text = str((execution.result or {}).get("errorText") or "The tool failed")
            chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": text})
        elif execution.status == ToolExecutionStatus.DENIED:
            chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif execution.status == ToolExecutionStatus.APPROVED and execution.name in agent.tools:
            approved.append((agent.tools[execution.name], execution.arguments, call_id))
    request = store.RunStartRequest(
        session_id=session.id,
        kind="tool_result",
        input_messages=[row],
        turn_message_id=run.turn_message_id,
        attempt=run.attempt,
        expected_current_run_id=run.id,
        supersede_live=True,
    )
    launch = Launch(request, lambda _r: chunks, parts=row["parts"], metadata=row["metadata"], approved=approved)
    return await starts.launch(session, launch, user=user)


async def tool_result_from_message(
    starts: RunStarts, session: ChatSession, message: dict[str, Any], user: Any
) -> RunHandle:
    """Answer a chat request whose last message is the assistant's, carrying tool results / approval answers.

    Raises RunSupersededError (a late result), ValidationError (``no_pending_tools``),
    RunNotActionableError (``run_not_suspended``).
    """
    run = await acurrent_run(session.id)
    if run is None or run.response_message_id != message["id"]:
        if await rq.ais_superseded_response(session.id, message["id"]):
            raise RunSupersededError()  # a late browser result (002, "Superseded runs")
        raise ValidationError(gettext_lazy("No pending tool calls for this message"), cause="no_pending_tools")
    if run.status == RunStatus.SUSPENDED_CLIENT_TOOL:
        # The message also carries the settled calls of earlier steps (and earlier runs of
        # this message): only the answers to calls this run waits for are submitted.
        pending = {e.tool_call_id for e in await rq.apending_tool_executions(run.id)}
        answers = [a for a in rq.tool_answers(message) if a["toolCallId"] in pending]
        handle = await submit_tool_results(starts, session=session, run_id=run.id, results=answers, user=user)
        if handle is not None:
            return handle
        info = await get_stream_manager().get_info(session.stream_id)
        head = info.head_sequence if info else run.start_sequence
        return RunHandle(
            run.id, session.stream_id, run.response_message_id, head, run_status=run.status, is_pending_batch=True
        )
    if run.is_live:
        return RunHandle(run.id, session.stream_id, run.response_message_id, run.start_sequence, True, run.status)
    raise RunNotActionableError(cause="run_not_suspended")


async def _check_room_for_answers(session: ChatSession, run: Run, answers: list[tuple[str, str, Any, str]]) -> None:
    """Refuse answers whose outputs would grow the response message past ``MAX_MESSAGE_BYTES``, before any is stored.

    Raises MessageTooLargeError (413, ``cause: "tool_result"``, ``limitBytes``, ``sizeBytes``:
    the message with every output added, an upper bound).
    """
    row = await rq.aload_response_row(session.id, run.start_message_count, run.response_message_id)
    size = json_size(row) if row is not None else 0
    size += sum(json_size(value) for _call_id, _status, value, _code in answers)
    limit = helix_settings.MAX_MESSAGE_BYTES
    if size > limit - ENDING_RESERVE_BYTES:
        raise MessageTooLargeError(
            gettext_lazy("Tool results too large"), cause="tool_result", limitBytes=limit, sizeBytes=size
        )


def _answer(result: Any) -> tuple[str, str, Any, str]:
    """Validate one submitted answer; return (tool call id, status, stored result, error code)."""
    if not isinstance(result, dict) or not isinstance(result.get("toolCallId"), str):
        raise InvalidToolResultError()
    if "approved" in result:
        if not isinstance(result["approved"], bool):
            raise InvalidToolResultError()
        status = ToolExecutionStatus.APPROVED if result["approved"] else ToolExecutionStatus.DENIED
        return result["toolCallId"], status, None, ""
    if "errorText" in result:
        error = {"errorText": str(result["errorText"])[:500]}
        return result["toolCallId"], ToolExecutionStatus.FAILED, error, "client_error"
    if "output" in result:
        return result["toolCallId"], ToolExecutionStatus.SUCCEEDED, result["output"], ""
    raise InvalidToolResultError()
