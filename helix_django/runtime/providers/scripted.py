"""The scripted provider: the embedded default model, deterministic, no API key needed.

OPTIONS (all optional; per agent in ``HELIX["AGENTS"][name]["PROVIDER"]["OPTIONS"]``)::

    {"TEXT": str,                  # the reply (default: a readable answer naming the question)
     "REASONING": str,             # reasoning text streamed before the reply
     "TOOL_CALLS": [{"name", "arguments": {...}, "id"?}],  # asked for in the first step
     "STEPS": [{...}, ...],        # per model call of a turn: its TEXT / REASONING / TOOL_CALLS (only
                                   # these), plus any pace/failure key overriding the ones above
     "PACE_TPS": 0,                # tokens per second; 0 = as fast as possible
     "FAIL_AFTER_CHUNKS": int,     # raise ProviderError after N streamed text tokens
     "FAIL_AT_FRACTION": float,    # ... after this fraction of the text (0.4 = 40 %)
     "FAIL_RETRYABLE": False,      # classification of that ProviderError
     "FAIL_ATTEMPTS": int,         # fail only the first N attempts of a step (default: all)
     "HANG_AFTER_CHUNKS": int,     # stop producing (until cancelled) after N tokens
     "DROP_AFTER_CHUNKS": int,     # end the stream without a finish after N tokens
     "DURABLE": False,             # a durable operation: OperationStarted, retrieve, cancel, stream_from
     "CACHE_ALIAS": "default",     # Django cache that keeps durable operations (use a shared one)
     "RULES": [{"MATCH": regex, ...any key above}]}  # first rule matching the user's text wins

The step of a call is the number of assistant messages after the last user message, so
a tool round-trip moves to the next entry of ``STEPS``. A Continue call (the partial answer
then ``CONTINUE_INSTRUCTION``) streams the rest of the reply after the partial text when the
reply starts with it, as a model continuing would. With ``DURABLE`` the operation's
outcome is computed when it starts and kept in the Django cache, so a later process's
:meth:`ScriptedProvider.retrieve` completes it after a drop or a process kill (000,
"Background operations are easier to recover than ephemeral streams").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.core.cache import caches

from helix_django.errors import ProviderError
from helix_django.runtime.context import CONTINUE_INSTRUCTION
from helix_django.runtime.providers.base import (
    BaseProvider,
    Finish,
    OperationResult,
    OperationStarted,
    Progress,
    ProviderEvent,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
)

_TOKEN_RE = re.compile(r"\s*\S+\s*|\s+")
_CACHE_PREFIX = "helix:scripted-op:"
_CACHE_SECONDS = 86_400
_CONTENT_KEYS = ("TEXT", "REASONING", "TOOL_CALLS")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into word tokens that join back to ``text`` exactly."""
    return _TOKEN_RE.findall(text)


def default_reply(question: str) -> str:
    """Return the default multi-paragraph answer naming what the user asked."""
    asked = " ".join(question.split())
    if len(asked) > 160:
        asked = asked[:157] + "..."
    asked = asked or "something without text"
    # A question that ends its own sentence is not given a second full stop.
    stop = "" if asked[-1] in ".?!\u2026" else "."
    return (
        f"You asked: \u201c{asked}\u201d{stop}\n\n"
        "This answer comes from the scripted provider, the embedded default model of helix_django. "
        "It streams a deterministic reply, so the site and its tests run without an API key; "
        'configure an OpenAI-compatible provider in HELIX["AGENTS"] to get real answers.\n\n'
        "Every chunk of this reply is stored with a sequence number before it reaches you, "
        "so you can reload the page in the middle of it and the reply resumes exactly where it was, "
        "with nothing lost and nothing repeated.\n\n"
        "Things to try while an answer is being written: reload the page; switch the network off and "
        "on again; stop the server and start it again, and the answer is either completed or shown as "
        "interrupted, with its partial text kept and the recovery actions that apply to it; press Stop, "
        "and the run ends as cancelled rather than failed; open a second tab and send from it, and it is "
        "told that a run is already active, with a Retry that works once this one has finished.\n\n"
        "Support staff find every generation in the Django admin, with its status, its partial text, "
        "its tool executions and a timeline of its stream, and can reconcile one that got stuck."
    )


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def _continued_answer(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Return (the question, the partial answer) when the call asks to continue a partial answer.

    A Continue run ends its context with the partial assistant message and then
    ``CONTINUE_INSTRUCTION`` as a user message (runtime/context.py).
    """
    if len(messages) < 3 or messages[-1].get("role") != "user" or messages[-1].get("content") != CONTINUE_INSTRUCTION:
        return None
    partial, asked = messages[-2], messages[-3]
    if partial.get("role") != "assistant" or asked.get("role") != "user":
        return None
    return str(asked.get("content") or ""), str(partial.get("content") or "")


def _step_index(messages: list[dict[str, Any]]) -> int:
    count = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "assistant":
            count += 1
    return count


def _tool_results_text(messages: list[dict[str, Any]]) -> str:
    results = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "tool":
            results.append(str(message.get("content", "")))
    return "; ".join(reversed(results))


class ScriptedProvider(BaseProvider):
    """Deterministic provider configured by OPTIONS (module docstring)."""

    name = "scripted"

    @property
    def supports_retrieve(self) -> bool:  # type: ignore[override]
        """True with DURABLE."""
        return bool(self.options.get("DURABLE"))

    @property
    def supports_cancel(self) -> bool:  # type: ignore[override]
        """True with DURABLE."""
        return bool(self.options.get("DURABLE"))

    @property
    def supports_stream_from(self) -> bool:  # type: ignore[override]
        """True with DURABLE."""
        return bool(self.options.get("DURABLE"))

    # --- the script ------------------------------------------------------------------------

    def plan(self, request: ProviderRequest) -> dict[str, Any]:
        """Return the effective config of this call: options, matching rule, then its step."""
        config = {k: v for k, v in self.options.items() if k not in ("RULES", "STEPS")}
        question = _last_user_text(request.messages)
        steps = self.options.get("STEPS")
        for rule in self.options.get("RULES") or []:
            if re.search(rule.get("MATCH", ""), question, re.IGNORECASE):
                config.update({k: v for k, v in rule.items() if k not in ("MATCH", "STEPS")})
                steps = rule.get("STEPS", steps)
                break
        index = _step_index(request.messages)
        if steps:
            # Content comes from the step alone; pace and failure keys are inherited.
            for key in _CONTENT_KEYS:
                config.pop(key, None)
            config.update(steps[min(index, len(steps) - 1)])
        elif index > 0:
            config.pop("TOOL_CALLS", None)
            results = _tool_results_text(request.messages)
            config["TEXT"] = f"The tools answered: {results}" if results else config.get("TEXT")
        continued = _continued_answer(request.messages)
        if not config.get("TEXT") and not config.get("TOOL_CALLS"):
            config["TEXT"] = default_reply(continued[0] if continued else question)
        if continued and continued[1] and str(config.get("TEXT") or "").startswith(continued[1]):
            # Continue: the script goes on where the partial answer stopped, like a model would.
            config["TEXT"] = config["TEXT"][len(continued[1]) :]
        return config

    def _events(self, config: dict[str, Any], request: ProviderRequest) -> list[ProviderEvent]:
        events: list[ProviderEvent] = [ReasoningDelta(t) for t in tokenize(config.get("REASONING") or "")]
        events += [TextDelta(t) for t in tokenize(config.get("TEXT") or "")]
        calls = config.get("TOOL_CALLS") or []
        for number, call in enumerate(calls, start=1):
            call_id = call.get("id") or f"call_{request.attempt_id[-8:] or 'x'}_{number}"
            events.append(ToolCall(call_id, call["name"], json.dumps(call.get("arguments", {}))))
        text_tokens = sum(isinstance(e, TextDelta) for e in events)
        events.append(Finish("tool-calls" if calls else "stop", {"inputTokens": 10, "outputTokens": text_tokens}))
        return events

    @staticmethod
    def _failure_point(config: dict[str, Any], request: ProviderRequest, text_tokens: int) -> tuple[str, int] | None:
        limit = config.get("FAIL_ATTEMPTS")
        if limit is not None and int(request.options.get("attempt_number", 1)) > int(limit):
            return None
        for kind, key in (("fail", "FAIL_AFTER_CHUNKS"), ("hang", "HANG_AFTER_CHUNKS"), ("drop", "DROP_AFTER_CHUNKS")):
            if config.get(key) is not None:
                return kind, int(config[key])
        if config.get("FAIL_AT_FRACTION") is not None:
            return "fail", int(text_tokens * float(config["FAIL_AT_FRACTION"]))
        return None

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Yield the scripted events of this call, honouring pace and failure points."""
        config = self.plan(request)
        events = self._events(config, request)
        text_tokens = sum(isinstance(e, TextDelta) for e in events)
        failure = self._failure_point(config, request, text_tokens)
        pace = float(config.get("PACE_TPS") or 0)
        if config.get("DURABLE"):
            operation_id = f"scrop_{uuid.uuid4().hex}"
            await self._save(config, operation_id, events, pace)
            yield OperationStarted(operation_id, 0)
        delivered = 0
        for position, event in enumerate(events, start=1):
            if failure is not None and isinstance(event, TextDelta | Finish) and delivered >= failure[1]:
                kind = failure[0]
                if kind == "fail":
                    raise ProviderError(retryable=bool(config.get("FAIL_RETRYABLE")), cause="scripted_failure")
                if kind == "hang":
                    await asyncio.Event().wait()
                return
            if pace and isinstance(event, TextDelta | ReasoningDelta):
                await asyncio.sleep(1 / pace)
            yield event
            if config.get("DURABLE"):
                yield Progress(position)
            if isinstance(event, TextDelta):
                delivered += 1

    # --- durable operations ----------------------------------------------------------------

    def _cache(self) -> Any:
        return caches[self.options.get("CACHE_ALIAS", "default")]

    async def _save(self, config: dict[str, Any], operation_id: str, events: list[ProviderEvent], pace: float) -> None:
        paced = sum(isinstance(e, TextDelta | ReasoningDelta) for e in events)  # its last event is due then
        record = {
            "created_at": time.time(),
            "duration_seconds": (paced / pace) if pace else 0.0,
            "events": [_dump(e) for e in events],
            "pace": pace,
            "cancelled": False,
        }
        await self._cache().aset(_CACHE_PREFIX + operation_id, record, _CACHE_SECONDS)

    async def _load(self, operation_id: str) -> dict[str, Any] | None:
        return await self._cache().aget(_CACHE_PREFIX + operation_id)

    async def retrieve(self, operation_id: str) -> OperationResult:
        """Return the operation's state: ``completed`` once its last event is due (:meth:`stream_from`'s timeline)."""
        record = await self._load(operation_id)
        if record is None:
            return OperationResult("unknown")
        if record["cancelled"]:
            return OperationResult("cancelled")
        if time.time() < record["created_at"] + record["duration_seconds"]:
            return OperationResult("in_progress")
        events = [_load_event(e) for e in record["events"]]
        finish = next((e for e in events if isinstance(e, Finish)), Finish())
        return OperationResult(
            "completed",
            text="".join(e.text for e in events if isinstance(e, TextDelta)),
            reasoning="".join(e.text for e in events if isinstance(e, ReasoningDelta)),
            tool_calls=[e for e in events if isinstance(e, ToolCall)],
            finish_reason=finish.reason,
            usage=finish.usage,
        )

    async def cancel(self, operation_id: str) -> str:
        """Mark the operation cancelled unless it already finished."""
        record = await self._load(operation_id)
        if record is None:
            return "unknown"
        if time.time() >= record["created_at"] + record["duration_seconds"]:
            return "already_finished"
        record["cancelled"] = True
        await self._cache().aset(_CACHE_PREFIX + operation_id, record, _CACHE_SECONDS)
        return "cancelled"

    async def stream_from(self, operation_id: str, after: int) -> AsyncIterator[ProviderEvent]:
        """Yield the operation's events after position ``after`` (1-based positions), each when it is due.

        The operation generates on its own timeline whether or not anyone streams it: a
        paced event is due ``n / PACE_TPS`` seconds after the operation was created, ``n``
        counting the paced (text and reasoning) events up to it. The events already due come
        at once, the rest live. Raises ProviderError (``operation_unavailable``) for an
        unknown or cancelled operation, also when it is cancelled while streaming.
        """
        record = await self._load(operation_id)
        if record is None or record["cancelled"]:
            raise ProviderError(cause="operation_unavailable")
        pace = float(record.get("pace") or 0)
        paced = 0
        for position, raw in enumerate(record["events"], start=1):
            if pace and raw["kind"] in ("TextDelta", "ReasoningDelta"):
                paced += 1
                if position > after:
                    await self._wait_due(operation_id, record["created_at"] + paced / pace)
            if position > after:
                yield _load_event(raw)
                yield Progress(position)

    async def _wait_due(self, operation_id: str, due: float) -> None:
        """Sleep until ``due`` (epoch seconds); raise ProviderError when the operation was cancelled."""
        left = due - time.time()
        if left <= 0:
            return
        await asyncio.sleep(left)
        record = await self._load(operation_id)
        if record is None or record["cancelled"]:
            raise ProviderError(cause="operation_unavailable")


def _dump(event: ProviderEvent) -> dict[str, Any]:
    return {"kind": type(event).__name__, **dataclasses.asdict(event)}


_KINDS = {cls.__name__: cls for cls in (TextDelta, ReasoningDelta, ToolCall, Finish)}


def _load_event(raw: dict[str, Any]) -> ProviderEvent:
    data = dict(raw)
    return _KINDS[data.pop("kind")](**data)
