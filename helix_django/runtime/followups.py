"""A follow-up message finishes the client-tool calls it consumed or abandoned.

002, "Tool results for a call in an earlier message": a send while a run waits for
browser results or approvals supersedes that run, and the new entry finishes its calls,
so no committed message keeps a pending call for ever:

- a result or a denial the client already holds in its copy of the waiting message (the
  request's messages) is *consumed*: stored as that call's outcome; an answer already
  stored (a partial batch) is shown as stored;
- any other pending call is *abandoned*: an ``output-error`` part with
  :data:`ABANDONED_TEXT` (``failed`` / ``abandoned`` for a browser call, ``denied`` /
  ``abandoned`` for an approval: the tool never ran).

The waiting message's finished parts replace its row in the new run's run-start commit,
and the new run's stream carries one ``tool-output-*`` chunk per call, which a client
rendering the new response gets as ``data-tool-output-elsewhere`` (then re-anchors).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from helix_django import store
from helix_django.models import Run, ToolExecution, ToolExecutionStatus
from helix_django.runtime import requests as rq

#: The error text of a pending call a later message abandoned.
ABANDONED_TEXT = "This tool call was abandoned by a later message"


@dataclasses.dataclass(frozen=True)
class Settlement:
    """How a follow-up send finishes the pending calls of the run it supersedes."""

    row: dict[str, Any]
    """The waiting message (UIMessage) with every pending call finished."""
    chunks: list[dict[str, Any]]
    """One ``tool-output-available`` / ``tool-output-error`` / ``tool-output-denied`` chunk per call."""
    outcomes: dict[str, tuple[str, Any, str]]
    """``{tool_call_id: (status, result, error_code)}`` for the superseded run's executions."""


#: Statuses of a call the superseded run still waited for (an approved call never ran).
OPEN_STATUSES = frozenset(
    {ToolExecutionStatus.AWAITING_CLIENT, ToolExecutionStatus.AWAITING_APPROVAL, ToolExecutionStatus.APPROVED}
)


def _recorded(part: dict[str, Any], execution: ToolExecution) -> dict[str, Any] | None:
    """Finish a part from an answer already stored (a partial batch); return its chunk (None: not final)."""
    call_id = part["toolCallId"]
    if execution.status == ToolExecutionStatus.SUCCEEDED:
        part.update(state="output-available", output=execution.result)
        return {"type": "tool-output-available", "toolCallId": call_id, "output": execution.result}
    if execution.status == ToolExecutionStatus.FAILED:
        text = str((execution.result or {}).get("errorText") or "The tool failed")
        part.update(state="output-error", errorText=text)
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
    if execution.status == ToolExecutionStatus.DENIED:
        part["state"] = "output-denied"
        return {"type": "tool-output-denied", "toolCallId": call_id}
    return None


def _finish(part: dict[str, Any], execution: ToolExecution, answer: dict[str, Any] | None) -> tuple[Any, ...]:
    """Finish one open part in place; return (chunk, status, result, error code)."""
    call_id = part["toolCallId"]
    is_approval = execution.status != ToolExecutionStatus.AWAITING_CLIENT
    answer = answer or {}
    if not is_approval and "output" in answer:
        part.update(state="output-available", output=answer["output"])
        chunk = {"type": "tool-output-available", "toolCallId": call_id, "output": answer["output"]}
        return chunk, ToolExecutionStatus.SUCCEEDED, answer["output"], ""
    if not is_approval and "errorText" in answer:
        part.update(state="output-error", errorText=answer["errorText"])
        chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": answer["errorText"]}
        return chunk, ToolExecutionStatus.FAILED, {"errorText": answer["errorText"]}, "client_error"
    if is_approval and answer.get("approved") is False:
        part["state"] = "output-denied"
        if isinstance(part.get("approval"), dict):
            part["approval"]["approved"] = False
        return {"type": "tool-output-denied", "toolCallId": call_id}, ToolExecutionStatus.DENIED, None, ""
    part.update(state="output-error", errorText=ABANDONED_TEXT)
    part.pop("output", None)
    chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": ABANDONED_TEXT}
    status = ToolExecutionStatus.DENIED if is_approval else ToolExecutionStatus.FAILED
    return chunk, status, {"errorText": ABANDONED_TEXT}, "abandoned"


async def asettle_pending_calls(run: Run, messages: list[dict[str, Any]]) -> Settlement | None:
    """Return how a send with ``messages`` finishes ``run``'s pending calls (None: nothing pending).

    ``run`` is the suspended run the send supersedes; ``messages`` the request's UIMessages
    (its copy of the waiting message may hold answers). Reads only; nothing is written.
    """
    executions = {e.tool_call_id: e for e in await store.alist_tool_executions(run_id=run.id)}
    row = await rq.aload_response_row(run.session_id, run.start_message_count, run.response_message_id)
    if row is None:
        return None
    held = next((m for m in messages if m.get("id") == run.response_message_id and m.get("role") == "assistant"), None)
    answers = {a["toolCallId"]: a for a in rq.tool_answers(held)} if held else {}
    row = copy.deepcopy(row)
    chunks: list[dict[str, Any]] = []
    outcomes: dict[str, tuple[str, Any, str]] = {}
    for part in row["parts"]:
        execution = executions.get(part.get("toolCallId")) if isinstance(part, dict) else None
        if execution is None or part.get("state") not in ("input-available", "approval-requested"):
            continue
        if execution.status not in OPEN_STATUSES:
            chunk = _recorded(part, execution)
            if chunk is not None:
                chunks.append(chunk)
            continue
        chunk, status, result, code = _finish(part, execution, answers.get(execution.tool_call_id))
        chunks.append(chunk)
        outcomes[execution.tool_call_id] = (status, result, code)
    return Settlement(row, chunks, outcomes) if chunks else None
