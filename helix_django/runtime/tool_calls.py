"""One tool call, executed under its record (000, "Persist tool execution before model continuation").

One call goes: complete call -> parse + validate + authorize -> ToolExecution record
(``started``) -> execute -> persist result/status -> result back to the model. A side
effect is never repeated: a call whose idempotency key already has a ``succeeded``
execution reuses that result (``error_code`` :data:`REPLAYED`); one whose earlier execution
is ``started``/``unknown`` is not run again unless the tool's ``reconcile`` says it never
happened (000, "Reconcile before retrying unknown side effects"). ``read_only`` may rerun.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from typing import Any

import jsonschema

from helix_django import store
from helix_django.limits import tool_result_too_large
from helix_django.models import ToolEffect, ToolExecution, ToolExecutionStatus
from helix_django.orm import sync_to_async
from helix_django.runtime.tool_reconcile import areconcile_all
from helix_django.runtime.tools import Tool, ToolContext
from helix_django.signals import tool_executed

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ToolOutcome:
    """What the loop streams for one call.

    ``kind``: ``output`` (``output``), ``error`` (``error_text``, fixed text),
    ``input_error`` (bad arguments; ``input`` is the raw text), ``pending_client`` or
    ``pending_approval`` (the run suspends).
    """

    kind: str
    input: Any = None
    output: Any = None
    error_text: str = ""


def parse_arguments(tool_obj: Tool | None, raw: str) -> tuple[dict[str, Any] | None, str]:
    """Return (arguments, '') or (None, fixed error text) for a call's JSON arguments text."""
    try:
        arguments = json.loads(raw or "{}")
    except ValueError:
        return None, "The tool arguments are not valid JSON"
    if not isinstance(arguments, dict):
        return None, "The tool arguments must be a JSON object"
    if tool_obj is None:
        return None, "Unknown tool"
    validator = jsonschema.Draft202012Validator(tool_obj.parameters)
    if next(validator.iter_errors(arguments), None) is not None:
        return None, "The tool arguments do not match the tool's schema"
    return arguments, ""


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


async def _invoke(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext) -> Any:
    kwargs = dict(arguments)
    if tool_obj.wants_context:
        kwargs["ctx"] = ctx
    assert tool_obj.fn is not None
    if inspect.iscoroutinefunction(tool_obj.fn):
        return await tool_obj.fn(**kwargs)
    return await sync_to_async(tool_obj.fn, thread_sensitive=True)(**kwargs)


async def execute_call(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    """Run one validated call durably (module docstring) and return its outcome.

    Raises RunSupersededError if the run lost its session before the record was created.
    A CancelledError inside the tool leaves the record ``started`` (the outcome is unknown).
    """
    if tool_obj.authorize is not None and not tool_obj.authorize(arguments, ctx):
        await store.asave_tool_execution(
            ctx.run_id, _record(tool_obj, arguments, ctx, ""), status=ToolExecutionStatus.FAILED, error_code="denied"
        )
        return ToolOutcome("error", input=arguments, error_text="The tool call was not authorized")
    if tool_obj.is_client:
        await store.asave_tool_execution(
            ctx.run_id, _record(tool_obj, arguments, ctx, ""), status=ToolExecutionStatus.AWAITING_CLIENT
        )
        return ToolOutcome("pending_client", input=arguments)
    key = tool_obj.key_for(arguments, ctx)
    replay = await _replay(tool_obj, arguments, ctx, key)
    if replay is not None:
        return replay  # a completed effect is not asked about again either
    if tool_obj.needs_approval:
        await store.asave_tool_execution(
            ctx.run_id, _record(tool_obj, arguments, ctx, key), status=ToolExecutionStatus.AWAITING_APPROVAL
        )
        return ToolOutcome("pending_approval", input=arguments)
    return await run_approved(tool_obj, arguments, ctx, key)


def _record(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext, key: str) -> dict[str, Any]:
    return {
        "tool_call_id": ctx.tool_call_id,
        "name": tool_obj.name,
        "arguments": arguments,
        "effect": tool_obj.effect,
        "idempotency_key": key,
        "is_client_tool": tool_obj.is_client,
        "step": ctx.step,
    }


async def _replay(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext, key: str) -> ToolOutcome | None:
    """Answer a call whose effect already has an execution from the record; None when it may run.

    A ``succeeded`` execution with ``key`` answers with its result (the call's record is
    ``succeeded``, ``error_code`` :data:`REPLAYED`). With the default key (the turn's) only
    the runs of the turn's current version count (``store.turn_run_ids``: an edit asks
    anew); a declared ``idempotency_key`` counts over the session. A ``side_effect`` key
    with a ``started``/``unknown`` execution answers "outcome unknown" (000, "Reconcile
    before retrying unknown side effects"), after the tool's own ``reconcile`` was asked
    about the ``unknown`` ones (:mod:`.tool_reconcile`).
    """
    if not key or tool_obj.effect == ToolEffect.READ_ONLY:
        return None
    prior = await store.afind_tool_executions(ctx.session_id, key, exclude_call=(ctx.run_id, ctx.tool_call_id))
    fields = _record(tool_obj, arguments, ctx, key)
    done = [e for e in prior if e.status == ToolExecutionStatus.SUCCEEDED]
    if done and tool_obj.idempotency_key is None:
        turn = await store.aturn_run_ids(ctx.session_id, ctx.turn_message_id)
        done = [e for e in done if e.run_id in turn]
    if done:
        await store.asave_tool_execution(
            ctx.run_id, fields, status=ToolExecutionStatus.SUCCEEDED, result=done[0].result, error_code=REPLAYED
        )
        return ToolOutcome("output", input=arguments, output=done[0].result)
    unknown = [e for e in prior if e.status == ToolExecutionStatus.UNKNOWN]
    if tool_obj.reconcile is not None and await areconcile_all(unknown, lambda _e: tool_obj):
        return await _replay(tool_obj, arguments, ctx, key)  # answered: decide again from the record
    unsure = any(e.status in (ToolExecutionStatus.STARTED, ToolExecutionStatus.UNKNOWN) for e in prior)
    if unsure and tool_obj.effect == ToolEffect.SIDE_EFFECT:
        await store.asave_tool_execution(ctx.run_id, fields, status=ToolExecutionStatus.UNKNOWN)
        return ToolOutcome("error", input=arguments, error_text=UNKNOWN_OUTCOME_TEXT)
    return None


async def run_approved(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext, key: str) -> ToolOutcome:
    """Execute a call that may run now (no approval needed, or approved), never repeating a side effect."""
    fields = _record(tool_obj, arguments, ctx, key)
    replay = await _replay(tool_obj, arguments, ctx, key)
    if replay is not None:
        return replay
    await store.asave_tool_execution(ctx.run_id, fields, status=ToolExecutionStatus.STARTED)
    try:
        result = _jsonable(await _invoke(tool_obj, arguments, ctx))
    except Exception as exc:
        logger.warning("tool %s failed: %s", tool_obj.name, type(exc).__name__)
        await store.afinish_tool_execution(
            ctx.run_id, ctx.tool_call_id, status=ToolExecutionStatus.FAILED, error_code="tool_error"
        )
        await _announce(tool_obj, ctx, ToolExecutionStatus.FAILED)
        return ToolOutcome("error", input=arguments, error_text="The tool failed")
    too_large = tool_result_too_large(result)
    # The tool ran: its record is succeeded (never run again), the result it cannot keep is replaced.
    await store.afinish_tool_execution(
        ctx.run_id, ctx.tool_call_id, status=ToolExecutionStatus.SUCCEEDED, result=too_large or result
    )
    await _announce(tool_obj, ctx, ToolExecutionStatus.SUCCEEDED)
    if too_large is not None:
        logger.warning(
            "tool %s returned %s bytes (limit %s)", tool_obj.name, too_large["sizeBytes"], too_large["limitBytes"]
        )
        return ToolOutcome("error", input=arguments, error_text=TOO_LARGE_TEXT)
    return ToolOutcome("output", input=arguments, output=result)


async def _announce(tool_obj: Tool, ctx: ToolContext, status: str) -> None:
    await tool_executed.asend(
        sender=ToolExecution, run_id=ctx.run_id, tool_call_id=ctx.tool_call_id, name=tool_obj.name, status=status
    )


#: ``error_code`` of a ``succeeded`` record answered with an earlier execution's result (the tool did not run).
REPLAYED = "replayed"
#: Text sent to the model (and shown) for a call whose result exceeded ``MAX_TOOL_RESULT_BYTES`` (limits.py).
TOO_LARGE_TEXT = "The tool result is larger than the limit (MAX_TOOL_RESULT_BYTES); it was not kept"
#: Text sent to the model (and shown) for a call whose earlier execution has no recorded outcome.
UNKNOWN_OUTCOME_TEXT = "The outcome of this tool call is unknown; it was not run again"
