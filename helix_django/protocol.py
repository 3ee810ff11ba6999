"""Chunk vocabulary and conversion to the AI SDK UI message stream.

Internal chunks are AI SDK UI message stream chunks (``ai@6`` types only, see
``reference/aisdk-protocol.md`` §1) plus ``helix-*`` internal types, with reserved
metadata keys ``_run``, ``_attempt`` and ``_step`` that never reach a client (002,
"Retried attempts": attemptId is never forwarded on content events).

:class:`MessageAccumulator` applies UI chunks to a UIMessage the way the AI SDK client
does (``processUIMessageStream``), so the server commits exactly the message a client
renders from the same chunks.
"""

from __future__ import annotations

import copy
from typing import Any

from helix_django.shared_chunks import UNKNOWN, EncodedChunk

Chunk = dict[str, Any]

RUN_KEY, ATTEMPT_KEY, STEP_KEY = "_run", "_attempt", "_step"
INTERNAL_PREFIX = "helix-"

#: Chunk types carrying content of an LLM attempt (dropped when the attempt is superseded).
CONTENT_TYPES = frozenset(
    {
        "start-step",
        "finish-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "source-url",
        "source-document",
        "file",
    }
)
TOOL_RESULT_TYPES = frozenset({"tool-output-available", "tool-output-error", "tool-output-denied"})


def is_internal(chunk: Chunk) -> bool:
    """Whether ``chunk`` is a helix-internal chunk that is never sent to an AI SDK client."""
    return chunk.get("type", "").startswith(INTERNAL_PREFIX)


def to_ui_chunk(chunk: Chunk) -> Chunk | None:
    """Return the AI SDK chunk for a stored chunk (metadata keys stripped), or None if internal."""
    if type(chunk) is EncodedChunk and chunk.ui is not UNKNOWN:
        return chunk.ui
    if is_internal(chunk):
        return None
    if not any(key.startswith("_") for key in chunk):
        return chunk
    return {key: value for key, value in chunk.items() if not key.startswith("_")}


def text_of(message: dict[str, Any]) -> str:
    """Return the concatenated text parts of a UIMessage."""
    return "".join(p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text")


class MessageAccumulator:
    """Builds one UIMessage from UI message stream chunks, as the AI SDK client does.

    ``message`` is ``{"id", "role": "assistant", "parts", "metadata"}``. Open text and
    reasoning parts are tracked by chunk ``id``; tool parts by ``toolCallId``. Unknown
    or out-of-order chunks are ignored rather than raised, since the server builds its
    own committed copy from chunks it wrote.
    """

    def __init__(self, message_id: str, *, parts: list[dict[str, Any]] | None = None, metadata: dict | None = None):
        self._message: dict[str, Any] = {
            "id": message_id,
            "role": "assistant",
            "parts": copy.deepcopy(parts) if parts else [],
            "metadata": dict(metadata or {}),
        }
        self._open: dict[tuple[str, str], dict[str, Any]] = {}
        self._pieces: dict[tuple[str, str], list[str]] = {}
        """The deltas of each open part not yet joined into its ``text`` (see :attr:`message`)."""
        self._is_joined = True
        self._tools: dict[str, dict[str, Any]] = {
            p["toolCallId"]: p for p in self._message["parts"] if "toolCallId" in p
        }
        self.finish_reason: str | None = None

    @property
    def message(self) -> dict[str, Any]:
        """The UIMessage so far (live dict; its open parts' text includes every delta applied).

        A delta is kept as a piece of its part and joined here, once per read, so the work
        per delta is bounded: appending each delta to the part's string would copy the whole
        text per delta, and a long answer would cost each delta in proportion to its length.
        """
        if not self._is_joined:
            for key in self._pieces:
                self._join(key)
            self._is_joined = True
        return self._message

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The message's parts (live list)."""
        return self.message["parts"]

    def open_parts(self) -> list[tuple[str, str]]:
        """Return ``(kind, chunk id)`` of each open text or reasoning part, in the order they opened."""
        return list(self._open)

    def _join(self, key: tuple[str, str]) -> None:
        pieces = self._pieces.get(key)
        if pieces:
            part = self._open[key]
            part["text"] = "".join([part["text"], *pieces])
            pieces.clear()

    def tool_part(self, tool_call_id: str) -> dict[str, Any] | None:
        """Return the tool part of ``tool_call_id`` or None."""
        return self._tools.get(tool_call_id)

    def apply(self, chunk: Chunk) -> None:
        """Apply one chunk (internal chunks and metadata keys are ignored)."""
        kind = chunk.get("type", "")
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, chunk)
        elif kind.startswith("data-") and not chunk.get("transient"):
            part = {"type": kind, "data": chunk.get("data")}
            if "id" in chunk:
                part["id"] = chunk["id"]
                for existing in self.parts:
                    if existing.get("type") == kind and existing.get("id") == chunk["id"]:
                        existing["data"] = chunk.get("data")
                        return
            self.parts.append(part)

    def snapshot(self, *, close: bool = True) -> dict[str, Any]:
        """Return a deep copy of the message; with ``close``, open parts are marked ``done``."""
        message = copy.deepcopy(self.message)
        if close:
            for part in message["parts"]:
                if part.get("state") == "streaming":
                    part["state"] = "done"
        return message

    # --- handlers ------------------------------------------------------------------------

    def _start(self, chunk: Chunk) -> None:
        if chunk.get("messageId"):
            self._message["id"] = chunk["messageId"]
        if chunk.get("messageMetadata"):
            self._message["metadata"].update(chunk["messageMetadata"])

    def _start_step(self, chunk: Chunk) -> None:
        self.parts.append({"type": "step-start"})

    def _open_part(self, kind: str, chunk: Chunk) -> None:
        part: dict[str, Any] = {"type": kind, "text": "", "state": "streaming"}
        if kind == "reasoning" and "id" in chunk:
            part["id"] = chunk["id"]  # ai@6 keeps the chunk id on reasoning parts (not on text parts)
        if chunk.get("providerMetadata"):
            part["providerMetadata"] = chunk["providerMetadata"]
        self.parts.append(part)
        key = (kind, chunk.get("id", ""))
        self._join(key)  # a part reopened under the same id: the old one keeps its text
        self._open[key] = part
        self._pieces[key] = []

    def _delta(self, kind: str, chunk: Chunk) -> None:
        pieces = self._pieces.get((kind, chunk.get("id", "")))
        if pieces is not None:
            pieces.append(chunk.get("delta", ""))
            self._is_joined = False

    def _end_part(self, kind: str, chunk: Chunk) -> None:
        key = (kind, chunk.get("id", ""))
        self._join(key)
        part = self._open.pop(key, None)
        self._pieces.pop(key, None)
        if part is not None:
            part["state"] = "done"

    def _finish_step(self, chunk: Chunk) -> None:
        for key, part in self._open.items():
            self._join(key)
            part["state"] = "done"
        self._open.clear()
        self._pieces.clear()

    def _tool(self, chunk: Chunk) -> dict[str, Any]:
        call_id = chunk["toolCallId"]
        part = self._tools.get(call_id)
        if part is None:
            name = chunk.get("toolName", "")
            part = {"type": "dynamic-tool" if chunk.get("dynamic") else f"tool-{name}", "toolCallId": call_id}
            if chunk.get("dynamic"):
                part["toolName"] = name
            part["state"] = "input-streaming"
            part["input"] = None
            self.parts.append(part)
            self._tools[call_id] = part
        return part

    def _tool_input_start(self, chunk: Chunk) -> None:
        self._tool(chunk)

    def _tool_input_available(self, chunk: Chunk) -> None:
        part = self._tool(chunk)
        part.update(state="input-available", input=chunk.get("input"))

    def _tool_input_error(self, chunk: Chunk) -> None:
        part = self._tool(chunk)
        part.update(state="output-error", input=chunk.get("input"), errorText=chunk.get("errorText", ""))

    def _tool_approval_request(self, chunk: Chunk) -> None:
        part = self._tools.get(chunk.get("toolCallId", ""))
        if part is not None:
            part.update(state="approval-requested", approval={"id": chunk.get("approvalId")})

    def _tool_output_available(self, chunk: Chunk) -> None:
        part = self._tools.get(chunk.get("toolCallId", ""))
        if part is not None:
            part.update(state="output-available", output=chunk.get("output"))
            part.pop("errorText", None)

    def _tool_output_error(self, chunk: Chunk) -> None:
        part = self._tools.get(chunk.get("toolCallId", ""))
        if part is not None:
            part.update(state="output-error", errorText=chunk.get("errorText", ""))

    def _tool_output_denied(self, chunk: Chunk) -> None:
        part = self._tools.get(chunk.get("toolCallId", ""))
        if part is not None:
            part["state"] = "output-denied"
            if isinstance(part.get("approval"), dict):
                part["approval"]["approved"] = False

    def _source(self, chunk: Chunk) -> None:
        self.parts.append(to_ui_chunk(chunk) or {})

    def _file(self, chunk: Chunk) -> None:
        self.parts.append({"type": "file", "url": chunk.get("url"), "mediaType": chunk.get("mediaType")})

    def _finish(self, chunk: Chunk) -> None:
        self._finish_step(chunk)
        self.finish_reason = chunk.get("finishReason")
        if chunk.get("messageMetadata"):
            self._message["metadata"].update(chunk["messageMetadata"])

    def _message_metadata(self, chunk: Chunk) -> None:
        self._message["metadata"].update(chunk.get("messageMetadata") or {})


_HANDLERS: dict[str, Any] = {
    "start": MessageAccumulator._start,
    "start-step": MessageAccumulator._start_step,
    "text-start": lambda self, c: self._open_part("text", c),
    "text-delta": lambda self, c: self._delta("text", c),
    "text-end": lambda self, c: self._end_part("text", c),
    "reasoning-start": lambda self, c: self._open_part("reasoning", c),
    "reasoning-delta": lambda self, c: self._delta("reasoning", c),
    "reasoning-end": lambda self, c: self._end_part("reasoning", c),
    "finish-step": MessageAccumulator._finish_step,
    "tool-input-start": MessageAccumulator._tool_input_start,
    "tool-input-available": MessageAccumulator._tool_input_available,
    "tool-input-error": MessageAccumulator._tool_input_error,
    "tool-approval-request": MessageAccumulator._tool_approval_request,
    "tool-output-available": MessageAccumulator._tool_output_available,
    "tool-output-error": MessageAccumulator._tool_output_error,
    "tool-output-denied": MessageAccumulator._tool_output_denied,
    "source-url": MessageAccumulator._source,
    "source-document": MessageAccumulator._source,
    "file": MessageAccumulator._file,
    "finish": MessageAccumulator._finish,
    "message-metadata": MessageAccumulator._message_metadata,
}
