"""Tools: the ``@tool`` decorator and the durable tool loop (000, "Persist tool execution before model continuation").

A tool declares its name, JSON schema (derived from type hints unless given), effect
class (``read_only``, ``idempotent``, ``side_effect``), an optional idempotency key, and
whether it runs in the browser (``client=True``) or needs a person's approval
(``needs_approval=True``)::

    @tool(effect="side_effect", idempotency_key=lambda args, ctx: f"issue:{args['title']}")
    def create_issue(title: str, body: str = "") -> dict:
        "Create an issue in the tracker."

One call goes: complete call -> parse + validate + authorize -> ToolExecution record
(``started``) -> execute -> persist result/status -> result back to the model. A side
effect is never repeated: a call whose idempotency key already has a ``succeeded``
execution reuses that result; one whose earlier execution is ``started``/``unknown`` is not
run again (000, "Reconcile before retrying unknown side effects"). A ``read_only`` tool
may always run again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import logging
import types
import typing
from collections.abc import Callable
from typing import Any

import jsonschema

from helix_django import store
from helix_django.conf import import_from_setting
from helix_django.limits import tool_result_too_large
from helix_django.models import ToolEffect, ToolExecution, ToolExecutionStatus
from helix_django.orm import sync_to_async
from helix_django.signals import tool_executed

logger = logging.getLogger(__name__)

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


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

    def key_for(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        """Return the side effect's idempotency identity ('' for a read-only tool without a key).

        Default for ``side_effect``/``idempotent``: a hash of the session, the turn, the
        tool name and the canonical arguments, so every attempt of one turn shares it.
        """
        if self.idempotency_key is not None:
            return str(self.idempotency_key(arguments, ctx))[:200]
        if self.effect == ToolEffect.READ_ONLY:
            return ""
        canonical = json.dumps([ctx.session_id, ctx.turn_message_id, self.name, arguments], sort_keys=True)
        return f"{self.name}:{hashlib.sha256(canonical.encode()).hexdigest()[:40]}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f"client tool {self.name!r} runs in the browser")
        return self.fn(*args, **kwargs)


def _schema_for(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _schema_for(options[0]) if len(options) == 1 else {"anyOf": [_schema_for(a) for a in options]}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    if origin in (list, tuple, set):
        args = typing.get_args(annotation)
        return {"type": "array", "items": _schema_for(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if annotation is list:
        return {"type": "array"}
    return {}


def schema_from_signature(fn: Callable[..., Any]) -> tuple[dict[str, Any], bool]:
    """Return (JSON schema of ``fn``'s parameters, whether it takes a ``ctx: ToolContext``)."""
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    wants_context = False
    for name, param in inspect.signature(fn).parameters.items():
        if name == "ctx" or hints.get(name) is ToolContext:
            wants_context = True
            continue
        properties[name] = _schema_for(hints.get(name, Any))
        if param.default is inspect.Parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, wants_context


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
) -> Any:
    """Declare a server tool (a sync or async function); usable as ``@tool`` or ``@tool(...)``.

    Raises ValueError for an unknown ``effect``.
    """
    if effect not in ToolEffect.values:
        raise ValueError(f"unknown tool effect: {effect!r}")

    def wrap(func: Callable[..., Any]) -> Tool:
        derived, wants_context = schema_from_signature(func)
        doc = (inspect.getdoc(func) or "").strip().splitlines()
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


async def run_approved(tool_obj: Tool, arguments: dict[str, Any], ctx: ToolContext, key: str) -> ToolOutcome:
    """Execute a call that may run now (no approval needed, or approved), never repeating a side effect."""
    fields = _record(tool_obj, arguments, ctx, key)
    if key and tool_obj.effect != ToolEffect.READ_ONLY:
        prior = await store.afind_tool_executions(ctx.session_id, key, exclude_call=(ctx.run_id, ctx.tool_call_id))
        done = next((e for e in prior if e.status == ToolExecutionStatus.SUCCEEDED), None)
        if done is not None:
            await store.asave_tool_execution(
                ctx.run_id, fields, status=ToolExecutionStatus.SUCCEEDED, result=done.result
            )
            return ToolOutcome("output", input=arguments, output=done.result)
        unsure = any(e.status in (ToolExecutionStatus.STARTED, ToolExecutionStatus.UNKNOWN) for e in prior)
        if unsure and tool_obj.effect == ToolEffect.SIDE_EFFECT:
            await store.asave_tool_execution(ctx.run_id, fields, status=ToolExecutionStatus.UNKNOWN)
            return ToolOutcome("error", input=arguments, error_text=UNKNOWN_OUTCOME_TEXT)
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


#: Text sent to the model (and shown) for a call whose result exceeded ``MAX_TOOL_RESULT_BYTES`` (limits.py).
TOO_LARGE_TEXT = "The tool result is larger than the limit (MAX_TOOL_RESULT_BYTES); it was not kept"
#: Text sent to the model (and shown) for a call whose earlier execution has no recorded outcome.
UNKNOWN_OUTCOME_TEXT = "The outcome of this tool call is unknown; it was not run again"
