"""The last safe checkpoint of a Regenerate: the turn's completed side effects open the new attempt.

000, "Keep a last-safe context checkpoint" and "Tool calls make recovery harder": a
Regenerate never starts from before a completed side effect. Its new response message
opens with the tool steps of the turn (the user message and every run answering it since
it was last sent or edited, ``store.turn_run_ids``) whose side-effecting or idempotent
calls succeeded: each step's calls and their recorded results, so the model is told what
was already done, the reader sees it, and a reworded call of the same effect is answered
from the record (:mod:`helix_django.runtime.tool_calls`). Read-only calls are not kept: they
may always run again.
"""

from __future__ import annotations

from typing import Any

from helix_django import store
from helix_django.models import ToolEffect, ToolExecution, ToolExecutionStatus
from helix_django.runtime.tool_calls import REPLAYED


def completed_effects(executions: list[ToolExecution]) -> list[ToolExecution]:
    """Return the executions that performed an effect: ``succeeded``, not read-only, not a replay.

    ``executions`` oldest first; of several with one idempotency key the first is kept.
    """
    seen: set[Any] = set()
    kept = []
    for execution in executions:
        if execution.status != ToolExecutionStatus.SUCCEEDED or execution.effect == ToolEffect.READ_ONLY:
            continue
        if execution.error_code == REPLAYED:
            continue
        identity = execution.idempotency_key or (execution.run_id, execution.tool_call_id)
        if identity in seen:
            continue
        seen.add(identity)
        kept.append(execution)
    return kept


def kept_step_chunks(executions: list[ToolExecution]) -> list[dict[str, Any]]:
    """Return the chunks re-opening ``executions`` as tool steps: one step per (run, step) of them.

    Each step: ``start-step``, ``tool-input-available`` per call (``toolCallId``,
    ``toolName``, ``input``), ``tool-output-available`` per call (the recorded ``output``),
    ``finish-step``.
    """
    steps: dict[tuple[str, int], list[ToolExecution]] = {}
    for execution in executions:
        steps.setdefault((execution.run_id, execution.step), []).append(execution)
    chunks: list[dict[str, Any]] = []
    for calls in steps.values():
        chunks.append({"type": "start-step"})
        chunks.extend(
            {"type": "tool-input-available", "toolCallId": e.tool_call_id, "toolName": e.name, "input": e.arguments}
            for e in calls
        )
        chunks.extend(
            {"type": "tool-output-available", "toolCallId": e.tool_call_id, "output": e.result} for e in calls
        )
        chunks.append({"type": "finish-step"})
    return chunks


async def akept_steps(session_id: str, turn_message_id: str) -> list[dict[str, Any]]:
    """Return the chunks that open a new attempt of the turn with its completed side effects (module docstring)."""
    executions = await store.alist_turn_tool_executions(session_id, turn_message_id)
    return kept_step_chunks(completed_effects(executions))
