"""Scripted model replies and the OpenAI wire events they stream as (Chat Completions and Responses).

Pure: a :class:`Reply` becomes Chat Completions chunks (:func:`chat_chunks`) or a Responses
API response and its events (:func:`response_events`); :mod:`helix_django.testing.fake_openai`
serves them. Text streams word by word (:func:`words`); usage counts 7 input tokens and one
output token per word.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
import uuid
from typing import Any


@dataclasses.dataclass
class Reply:
    """One scripted model reply."""

    text: str = "Hello from the fake server."
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """``[{"id", "name", "arguments": dict}]``."""
    cut_after: int | None = None
    """Close the connection after this many SSE events (no terminal frame)."""
    gate: threading.Event | None = None
    """Hold the stream after its first event until this event is set."""
    status: int = 200
    """A non-200 status answers with an OpenAI-style error body instead."""
    interval_seconds: float = 0.0
    """Pace of a Responses API response on the server: event ``i`` is due ``i * interval_seconds``
    after the response was created, whether or not a client is connected (0: all at once)."""
    reports_usage: bool = True
    """False: no usage at all, as a server that ignores ``stream_options.include_usage`` answers
    (no usage chunk; the Responses API's final response with ``usage: null``)."""


def words(text: str) -> list[str]:
    """Split ``text`` into the tokens it streams as: each word with its surrounding whitespace."""
    return re.findall(r"\s*\S+\s*|\s+", text)


def chat_chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    """Return the Chat Completions stream chunks of ``reply`` (role, reasoning, words, tool calls, finish, usage)."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"reasoning_content": w}) for w in words(reply.reasoning)]
    out += [chunk({"content": w}) for w in words(reply.text)]
    for index, call in enumerate(reply.tool_calls):
        arguments = json.dumps(call.get("arguments", {}))
        half = len(arguments) // 2
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": arguments[:half]},
        }
        out.append(chunk({"tool_calls": [head]}))
        out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if not reply.reports_usage:
        return out
    out.append(
        {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": len(words(reply.text)),
                "total_tokens": 7 + len(words(reply.text)),
            },
        }
    )
    return out


def response_events(reply: Reply, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return ``(final response, stream events)`` of ``reply`` on the Responses API, numbered by ``sequence_number``.

    ``body`` is the request's JSON (its ``model`` and ``background`` are echoed).
    """
    response_id = f"resp_{uuid.uuid4().hex}"
    output: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    shell = {
        "id": response_id,
        "object": "response",
        "created_at": time.time(),
        "model": body.get("model", ""),
        "output": [],
        "status": "in_progress",
        "background": bool(body.get("background")),
    }
    events.append({"type": "response.created", "response": dict(shell)})
    events.append({"type": "response.in_progress", "response": dict(shell)})
    if reply.reasoning:
        rid = f"rs_{uuid.uuid4().hex[:8]}"
        events += [
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": rid,
                "output_index": 0,
                "summary_index": 0,
                "delta": w,
            }
            for w in words(reply.reasoning)
        ]
        output.append({"id": rid, "type": "reasoning", "summary": [{"type": "summary_text", "text": reply.reasoning}]})
    if reply.text:
        mid = f"msg_{uuid.uuid4().hex[:8]}"
        index = len(output)
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {"id": mid, "type": "message", "role": "assistant", "status": "in_progress", "content": []},
            }
        )
        events += [
            {
                "type": "response.output_text.delta",
                "item_id": mid,
                "output_index": index,
                "content_index": 0,
                "delta": w,
                "logprobs": [],
            }
            for w in words(reply.text)
        ]
        item = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
        events.append(
            {
                "type": "response.output_text.done",
                "item_id": mid,
                "output_index": index,
                "content_index": 0,
                "text": reply.text,
                "logprobs": [],
            }
        )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        output.append(item)
    for call in reply.tool_calls:
        item = {
            "id": f"fc_{uuid.uuid4().hex[:8]}",
            "type": "function_call",
            "call_id": call["id"],
            "name": call["name"],
            "arguments": json.dumps(call.get("arguments", {})),
            "status": "completed",
        }
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": len(output),
                "item": {**item, "arguments": "", "status": "in_progress"},
            }
        )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": len(output),
                "arguments": item["arguments"],
                "name": call["name"],
            }
        )
        events.append({"type": "response.output_item.done", "output_index": len(output), "item": item})
        output.append(item)
    final = {
        **shell,
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": 7,
            "output_tokens": len(words(reply.text)),
            "total_tokens": 7 + len(words(reply.text)),
        }
        if reply.reports_usage
        else None,
    }
    events.append({"type": "response.completed", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return final, events
