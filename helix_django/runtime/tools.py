"""Tools: the ``@tool`` decorator, ``client_tool`` and ``load_tools`` (declaring what a tool is).

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

How one call executes under its record: :mod:`.tool_calls`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from helix_django.conf import import_from_setting
from helix_django.models import ToolEffect
from helix_django.runtime.tool_schemas import schema_from_signature

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
