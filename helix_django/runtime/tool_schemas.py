"""A tool's JSON schema derived from its function's signature and type hints."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


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


def schema_from_signature(fn: Callable[..., Any], context_type: Any = None) -> tuple[dict[str, Any], bool]:
    """Return (JSON schema of ``fn``'s parameters, whether it takes a ``ctx``).

    A parameter named ``ctx`` or annotated ``context_type`` is the call's context, not an argument.
    """
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    wants_context = False
    for name, param in inspect.signature(fn).parameters.items():
        if name == "ctx" or hints.get(name) is context_type:
            wants_context = True
            continue
        properties[name] = _schema_for(hints.get(name, Any))
        if param.default is inspect.Parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema, wants_context
