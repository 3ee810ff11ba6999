"""The replayed prefix (002, C-1): a committed UIMessage as AI SDK ``ai@6.0.0`` chunks.

``prefix_chunks(message)`` returns ``start {messageId, messageMetadata?}``, a transient
``data-helix-replay {phase: "begin", messageId}``, the message's committed parts as
chunks, and ``data-helix-replay {phase: "end", messageId}``. Applied by the AI SDK
client (or :class:`helix_django.protocol.MessageAccumulator`) to an empty message, the
chunks rebuild the committed message: same id, same parts.

Tool parts replay their last state: an answered approval replays as its answer
(approved -> ``input-available``, denied -> ``output-denied``); a pending approval
replays its request.
"""

from __future__ import annotations

from typing import Any

from helix_django.limits import split_deltas

Chunk = dict[str, Any]
_TOOL_STATES_WITH_INPUT = frozenset(
    {"input-available", "approval-requested", "approval-responded", "output-available", "output-error", "output-denied"}
)


def replay_marker(phase: str, message_id: str) -> Chunk:
    """Return the transient ``data-helix-replay`` marker of ``phase`` (``begin``/``end``)."""
    return {"type": "data-helix-replay", "data": {"phase": phase, "messageId": message_id}, "transient": True}


def _meta(part: dict[str, Any], key: str = "providerMetadata") -> dict[str, Any]:
    value = part.get(key)
    return {"providerMetadata": value} if value else {}


def _text_chunks(kind: str, part: dict[str, Any], block_id: str) -> list[Chunk]:
    meta = _meta(part)
    return [
        {"type": f"{kind}-start", "id": block_id, **meta},
        {"type": f"{kind}-delta", "id": block_id, "delta": part.get("text", "")},
        {"type": f"{kind}-end", "id": block_id, **meta},
    ]


def _tool_fields(part: dict[str, Any]) -> dict[str, Any]:
    """The fields every chunk of a tool part's input carries: the call's id and name, its provider facts."""
    kind = part.get("type", "")
    is_dynamic = kind == "dynamic-tool"
    name = part.get("toolName", "") if is_dynamic else kind.removeprefix("tool-")
    common: dict[str, Any] = {"toolCallId": part["toolCallId"], "toolName": name}
    if is_dynamic:
        common["dynamic"] = True
    for key in ("providerExecuted", "title"):
        if key in part:
            common[key] = part[key]
    if part.get("callProviderMetadata"):
        common["providerMetadata"] = part["callProviderMetadata"]
    return common


def _tool_chunks(part: dict[str, Any]) -> list[Chunk]:
    call_id = part["toolCallId"]
    common = _tool_fields(part)
    state = part.get("state", "input-available")
    if state not in _TOOL_STATES_WITH_INPUT:
        return [{"type": "tool-input-start", **common}]
    if state == "output-error" and part.get("input") is None and "rawInput" in part:
        return [
            {"type": "tool-input-error", **common, "input": part["rawInput"], "errorText": part.get("errorText", "")}
        ]
    chunks: list[Chunk] = [{"type": "tool-input-available", **common, "input": part.get("input")}]
    approval = part.get("approval") if isinstance(part.get("approval"), dict) else None
    if state == "approval-requested" and approval:
        chunks.append({"type": "tool-approval-request", "approvalId": approval.get("id"), "toolCallId": call_id})
    elif state == "output-available":
        chunks.append({"type": "tool-output-available", "toolCallId": call_id, "output": part.get("output")})
    elif state == "output-error":
        chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": part.get("errorText", "")})
    elif state == "output-denied":
        chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
    return chunks


def _part_chunks(part: dict[str, Any], index: int) -> list[Chunk]:
    kind = part.get("type", "")
    if kind in ("text", "reasoning"):
        return _text_chunks(kind, part, part.get("id") or f"replay-{index}")
    if kind == "dynamic-tool" or (kind.startswith("tool-") and "toolCallId" in part):
        return _tool_chunks(part)
    if kind.startswith("data-"):
        chunk: Chunk = {"type": kind, "data": part.get("data")}
        if "id" in part:
            chunk["id"] = part["id"]
        return [chunk]
    if kind in ("source-url", "source-document"):
        return [dict(part)]
    if kind == "file":
        return [{"type": "file", "url": part.get("url"), "mediaType": part.get("mediaType"), **_meta(part)}]
    return []


def prefix_chunks(message: dict[str, Any] | None, message_id: str) -> list[Chunk]:
    """Return the replay of ``message`` (None: an empty prefix) under ``message_id``, with markers."""
    start: Chunk = {"type": "start", "messageId": message_id}
    if message and message.get("metadata"):
        start["messageMetadata"] = message["metadata"]
    chunks: list[Chunk] = [start, replay_marker("begin", message_id)]
    in_step = False
    for index, part in enumerate((message or {}).get("parts", [])):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "step-start":
            if in_step:
                chunks.append({"type": "finish-step"})
            chunks.append({"type": "start-step"})
            in_step = True
            continue
        chunks.extend(_part_chunks(part, index))
    if in_step:
        chunks.append({"type": "finish-step"})
    chunks.append(replay_marker("end", message_id))
    return split_deltas(chunks)  # a long committed text replays as deltas under MAX_CHUNK_BYTES
