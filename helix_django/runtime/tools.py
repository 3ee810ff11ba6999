"""Tools: the ``@tool`` decorator and the durable tool loop (000, "Persist tool execution before model continuation").

A tool declares its name, JSON schema (derived from type hints unless given), effect
class (``read_only``, ``idempotent``, ``side_effect``), what identifies its effect
(``effect_key``), an optional idempotency key, and whether it runs in the browser
(``client=True``) or needs a person's approval (``needs_approval=True``)::

    @tool(effect="side_effect", effect_key=("to", "subject"))
    def send_email(to: str, subject: str, body: str) -> dict:
        "Send an email."

``effect_key`` is a list of argument names or ``callable(arguments) -> JSON value``; the
default is every argument. Two calls of one turn (the user message and every attempt
answering it: regenerates and continues) with the same tool and effect key are one side
effect, so a model that rewords the body of an email already sent is answered with the
recorded result (000, "Tool calls make recovery harder").

One call goes: complete call -> parse + validate + authorize -> ToolExecution record
(``started``) -> execute -> persist result/status -> result back to the model. A side
effect is never repeated: a call whose idempotency key already has a ``succeeded``
execution reuses that result (``error_code`` :data:`REPLAYED`); one whose earlier execution
is ``started``/``unknown`` is not run again unless the tool's ``reconcile`` says it never
happened (000, "Reconcile before retrying unknown side effects"). ``read_only`` may rerun.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema

from helix_django import store
from helix_django.conf import import_from_setting
from helix_django.limits import tool_result_too_large
from helix_django.models import ToolEffect, ToolExecution, ToolExecutionStatus
from helix_django.orm import sync_to_async
from helix_django.runtime.tool_reconcile import areconcile_all
from helix_django.runtime.tool_schemas import schema_from_signature
from helix_django.signals import tool_executed

logger = logging.getLogger(__name__)

EffectKey = Sequence[str] | Callable[[dict[str, Any]], Any] | None
"""A tool's ``effect_key``: argument names, or a callable of the arguments, or None (all arguments)."""


@dataclasses.dataclass
class ToolContext:
    """What a tool (and its idempotency key / authorize callables) knows about its call."""

    run_id: str
    session_id: str
    tool_call_id: str
    turn_message_id: str = ""
    user: Any = None
    step: int = 0


@dataclasses.dataclass
class Tool:
    """A declared tool. ``fn`` is None for a client tool (it runs in the browser)."""

    name: str
    description: str
    parameters: dict[str, Any]
    effect: str = ToolEffect.READ_ONLY
    fn: Callable[..., Any] | None = None
    idempotency_key: Callable[[dict[str, Any], ToolContext], str] | None = None
    authorize: Callable[[dict[str, Any], ToolContext], bool] | None = None
    is_client: bool = False
    needs_approval: bool = False
    wants_context: bool = False
    effect_key: EffectKey = None
    """What identifies the effect: argument names, ``callable(arguments) -> JSON value``, or None (all arguments)."""
    reconcile: Callable[[Any], Any] | None = None
    """``reconcile(execution)``: asks the external system about an ``unknown`` execution (:mod:`.tool_reconcile`)."""

    def effect_of(self, arguments: dict[str, Any]) -> Any:
        """Return the JSON value identifying this call's effect (:attr:`effect_key`; default: ``arguments``)."""
        if self.effect_key is None:
            return arguments
        if callable(self.effect_key):
            return self.effect_key(arguments)
        return {name: arguments.get(name) for name in self.effect_key}

    def key_for(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        """Return the side effect's idempotency identity ('' for a read-only tool without a key).

        Default for ``side_effect``/``idempotent``: a hash of the session, the turn, the
        tool name and the effect (:meth:`effect_of`), so every attempt of one turn shares
        it. A declared ``idempotency_key`` is used as it is (at most 200 characters).
        """
        if self.idempotency_key is not None:
            return str(self.idempotency_key(arguments, ctx))[:200]
        if self.effect == ToolEffect.READ_ONLY:
            return ""
        effect = self.effect_of(arguments)
        canonical = json.dumps([ctx.session_id, ctx.turn_message_id, self.name, effect], sort_keys=True, default=str)
        return f"{self.name}:{hashlib.sha256(canonical.encode()).hexdigest()[:40]}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f"client tool {self.name!r} runs in the browser")
        return self.fn(*args, **kwargs)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    effect: str = ToolEffect.READ_ONLY,
    idempotency_key: Callable[[dict[str, Any], ToolContext], str] | None = None,
    authorize: Callable[[dict[str, Any], ToolContext], bool] | None = None,
    needs_approval: bool = False,
    effect_key: EffectKey = None,
    reconcile: Callable[[Any], Any] | None = None,
) -> Any:
    """Declare a server tool (a sync or async function); usable as ``@tool`` or ``@tool(...)``.

    ``effect_key``: what identifies the effect (module docstring); ``reconcile``: settles an
    unknown outcome (:mod:`.tool_reconcile`). Raises ValueError for an unknown ``effect``, an
    ``effect_key`` naming an argument the schema lacks, a ``reconcile`` not on a ``side_effect``.
    """
    if effect not in ToolEffect.values:
        raise ValueError(f"unknown tool effect: {effect!r}")
    if isinstance(effect_key, str):
        effect_key = (effect_key,)
    if reconcile is not None and effect != ToolEffect.SIDE_EFFECT:
        raise ValueError("only a side_effect tool reconciles an unknown outcome")

    def wrap(func: Callable[..., Any]) -> Tool:
        derived, wants_context = schema_from_signature(func, ToolContext)
        doc = (inspect.getdoc(func) or "").strip().splitlines()
        if effect_key is not None and not callable(effect_key):
            known = set((schema or derived).get("properties") or {})
            unknown = [key for key in effect_key if key not in known]
            if unknown:
                raise ValueError(f"effect_key names unknown arguments of {func.__name__}: {unknown}")
        return Tool(
            name=name or func.__name__,
            description=description or (doc[0] if doc else func.__name__),
            parameters=schema or derived,
            effect=effect,
            fn=func,
            idempotency_key=idempotency_key,
            authorize=authorize,
            needs_approval=needs_approval,
            wants_context=wants_context,
            effect_key=effect_key,
            reconcile=reconcile,
        )

    return wrap(fn) if fn is not None else wrap


def client_tool(name: str, *, description: str = "", schema: dict[str, Any] | None = None) -> Tool:
    """Declare a tool that runs in the browser: the run suspends until its result is submitted."""
    return Tool(
        name=name,
        description=description or name,
        parameters=schema or {"type": "object"},
        effect=ToolEffect.SIDE_EFFECT,
        is_client=True,
    )


def load_tools(entries: list[Any], setting: str = "HELIX['AGENTS'][...]['TOOLS']") -> dict[str, Tool]:
    """Return tools by name from import strings or Tool objects (``HELIX["AGENTS"][...]["TOOLS"]``).

    ``setting`` names the list in errors. Raises SettingImportError for a path that cannot be
    imported and TypeError for an object that is not a Tool.
    """
    tools: dict[str, Tool] = {}
    for entry in entries or []:
        obj = import_from_setting(entry, setting)
        if not isinstance(obj, Tool):
            raise TypeError(f"{entry!r} is not a helix_django tool")
        tools[obj.name] = obj
    return tools


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
