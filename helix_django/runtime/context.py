"""Model context: committed UIMessages -> provider-neutral messages.

Persistence and context construction are separate decisions (000, "Do not automatically
feed arbitrary partial output back to the model"): an assistant message whose metadata
marks it partial (``metadata.helix.partial``) is left out of the next model context,
unless it is the message the user chose to Continue.
"""

from __future__ import annotations

import json
from typing import Any

#: Sent to the model after a continued partial answer that ends in plain text.
CONTINUE_INSTRUCTION = "Continue your previous answer exactly where it stopped, without repeating it."
NO_RESULT_TEXT = "No result was recorded for this tool call."
DENIED_TEXT = "The user denied this tool call."


def is_partial(message: dict[str, Any]) -> bool:
    """Whether a committed assistant message is partial output (interrupted/failed/cancelled)."""
    helix = (message.get("metadata") or {}).get("helix") or {}
    return bool(helix.get("partial"))


def tool_name_of(part: dict[str, Any]) -> str:
    """Return the tool name of a UI tool part (``tool-<name>`` or ``dynamic-tool``)."""
    if part.get("type") == "dynamic-tool":
        return str(part.get("toolName", ""))
    return str(part.get("type", ""))[len("tool-") :]


def is_tool_part(part: dict[str, Any]) -> bool:
    """Whether ``part`` is a tool invocation part."""
    kind = str(part.get("type", ""))
    return kind.startswith("tool-") or kind == "dynamic-tool"


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in parts if p.get("type") == "text")


def _tool_result(part: dict[str, Any]) -> str:
    state = part.get("state")
    if state == "output-available":
        return json.dumps(part.get("output"), default=str)
    if state == "output-error":
        return str(part.get("errorText") or "The tool failed")
    if state == "output-denied" or (part.get("approval") or {}).get("approved") is False:
        return DENIED_TEXT
    return NO_RESULT_TEXT


def _assistant(message: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    steps: list[list[dict[str, Any]]] = [[]]
    for part in message.get("parts", []):
        if part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append(part)
    for step in steps:
        calls = [p for p in step if is_tool_part(p) and p.get("input") is not None]
        text = _text(step)
        if not text and not calls:
            continue
        entry: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            entry["tool_calls"] = [
                {"id": p["toolCallId"], "name": tool_name_of(p), "arguments": json.dumps(p.get("input"))} for p in calls
            ]
        out.append(entry)
        out.extend({"role": "tool", "tool_call_id": p["toolCallId"], "content": _tool_result(p)} for p in calls)
    return out


def to_provider_messages(messages: list[dict[str, Any]], *, keep_partial_id: str = "") -> list[dict[str, Any]]:
    """Convert UIMessages (oldest first) to provider-neutral messages.

    Partial assistant messages are skipped except the one with id ``keep_partial_id``.
    System messages are dropped: the agent's system prompt is sent separately.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            out.append({"role": "user", "content": _text(message.get("parts", []))})
        elif role == "assistant":
            if is_partial(message) and message.get("id") != keep_partial_id:
                continue
            out.extend(_assistant(message))
    return out
