"""The OpenAI provider: the official ``openai`` SDK against any OpenAI-compatible server.

OPTIONS::

    {"BASE_URL": "https://api.openai.com/v1",   # Ollama, vLLM, llama.cpp servers work too
     "API_KEY": None,                           # default: the OPENAI_API_KEY environment variable
     "API": "chat",                             # "chat" (Chat Completions) or "responses"
     "BACKGROUND": False,                       # Responses API background mode (durable operations)
     "TIMEOUT_SECONDS": 600, "MAX_RETRIES": 0, "EXTRA_BODY": {}}

``MAX_RETRIES`` defaults to 0: a retried POST may start a second generation (000, "If it
does not, automatic retry may create a second operation"). In background mode the
response id is yielded as :class:`OperationStarted` the moment ``response.created``
arrives, and the provider declares ``retrieve``, ``cancel`` and ``stream_from`` (the
SDK's ``responses.retrieve(..., stream=True, starting_after=N)``). Errors become
ProviderError with a fixed message: the provider's own text is never kept.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import httpx
import openai

if TYPE_CHECKING:  # for the type checker only: older SDKs the package allows lack these modules
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseReasoningItem

from helix_django.errors import ProviderError
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

logger = logging.getLogger(__name__)

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool-calls", "function_call": "tool-calls"}
_FINISH["content_filter"] = "content-filter"


def _provider_error(exc: BaseException, *, has_output: bool) -> ProviderError:
    """Classify an SDK/HTTP failure; a cut after output is ``stream_dropped`` (recoverable)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return ProviderError(retryable=status in (408, 409, 429) or status >= 500, cause=f"http_{status}")
    if has_output:
        return ProviderError(retryable=True, cause="stream_dropped")
    return ProviderError(retryable=True, cause="connection")


def chat_messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """Convert provider-neutral messages to Chat Completions messages (system prompt first)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in message["tool_calls"]
            ]
            out.append({"role": "assistant", "content": message.get("content") or None, "tool_calls": calls})
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        else:
            out.append({"role": message["role"], "content": message.get("content", "")})
    return out


def response_input(request: ProviderRequest) -> list[dict[str, Any]]:
    """Convert provider-neutral messages to Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message["role"] == "tool":
            items.append(
                {"type": "function_call_output", "call_id": message["tool_call_id"], "output": message["content"]}
            )
            continue
        if message.get("content"):
            items.append({"role": message["role"], "content": message["content"]})
        for call in message.get("tool_calls") or []:
            items.append(
                {"type": "function_call", "call_id": call["id"], "name": call["name"], "arguments": call["arguments"]}
            )
    return items


class OpenAIProvider(BaseProvider):
    """Chat Completions streaming with tool calls, or the Responses API (optionally in background mode)."""

    name = "openai"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.api = self.options.get("API", "chat")
        if self.api not in ("chat", "responses"):
            raise ValueError("OpenAIProvider OPTIONS['API'] must be 'chat' or 'responses'")
        self.is_background = bool(self.options.get("BACKGROUND")) and self.api == "responses"
        self._client: openai.AsyncOpenAI | None = None

    @property
    def supports_retrieve(self) -> bool:  # type: ignore[override]
        """True in background mode."""
        return self.is_background

    @property
    def supports_cancel(self) -> bool:  # type: ignore[override]
        """True in background mode."""
        return self.is_background

    @property
    def supports_stream_from(self) -> bool:  # type: ignore[override]
        """True in background mode."""
        return self.is_background

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client (created on first use)."""
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                base_url=self.options.get("BASE_URL"),
                api_key=self.options.get("API_KEY") or os.environ.get("OPENAI_API_KEY") or "not-needed",
                timeout=float(self.options.get("TIMEOUT_SECONDS", 600)),
                max_retries=int(self.options.get("MAX_RETRIES", 0)),
            )
        return self._client

    async def aclose(self) -> None:
        """Close the SDK client (its HTTP connection pool)."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Yield the events of one model response (Chat Completions or Responses API)."""
        return self._chat(request) if self.api == "chat" else self._responses(request)

    # --- Chat Completions ----------------------------------------------------------------------

    async def _chat(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        kwargs: dict[str, Any] = {"model": request.model, "messages": chat_messages(request), "stream": True}
        kwargs["stream_options"] = {"include_usage": True}
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if self.options.get("EXTRA_BODY"):
            kwargs["extra_body"] = self.options["EXTRA_BODY"]
        calls: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        usage: dict[str, int] = {}
        has_output = False
        try:
            stream = await self.client.chat.completions.create(**kwargs)
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = _counts(chunk.usage, "prompt_tokens", "completion_tokens")
                for choice in chunk.choices:
                    delta = choice.delta
                    reasoning = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
                    if reasoning:
                        has_output = True
                        yield ReasoningDelta(str(reasoning))
                    if delta.content:
                        has_output = True
                        yield TextDelta(delta.content)
                    for call in delta.tool_calls or []:
                        entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        entry["id"] = call.id or entry["id"]
                        if call.function is not None:
                            entry["name"] = call.function.name or entry["name"]
                            entry["arguments"] += call.function.arguments or ""
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
        except (openai.APIError, httpx.HTTPError) as exc:
            logger.warning("openai chat stream failed: %s", type(exc).__name__)
            raise _provider_error(exc, has_output=has_output) from None
        if finish_reason is None:
            return  # a drop: the caller sees no Finish
        for index in sorted(calls):
            entry = calls[index]
            yield ToolCall(entry["id"] or f"call_{index}", entry["name"], entry["arguments"])
        yield Finish(_FINISH.get(finish_reason, "other"), usage)

    # --- Responses API -------------------------------------------------------------------------

    async def _responses(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        kwargs: dict[str, Any] = {"model": request.model, "input": response_input(request), "stream": True}
        if request.system:
            kwargs["instructions"] = request.system
        if request.tools:
            kwargs["tools"] = [
                {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
                for t in request.tools
            ]
        if self.is_background:
            kwargs.update(background=True, store=True)
        if self.options.get("EXTRA_BODY"):
            kwargs["extra_body"] = self.options["EXTRA_BODY"]
        async for event in self._events(lambda: self.client.responses.create(**kwargs)):
            yield event

    async def stream_from(self, operation_id: str, after: int) -> AsyncIterator[ProviderEvent]:
        """Replay a background response's events after sequence number ``after``."""
        opener = lambda: self.client.responses.retrieve(operation_id, stream=True, starting_after=after)  # noqa: E731
        async for event in self._events(opener, seen_output=True):
            yield event

    async def _events(self, opener: Any, *, seen_output: bool = False) -> AsyncIterator[ProviderEvent]:
        has_output = seen_output
        calls: list[ToolCall] = []
        try:
            stream = await opener()
            async for event in stream:
                kind = getattr(event, "type", "")
                sequence = int(getattr(event, "sequence_number", 0) or 0)
                if kind == "response.created":
                    has_output = True  # the operation exists from here on: a cut is recoverable
                    yield OperationStarted(event.response.id, sequence)
                elif kind == "response.output_text.delta":
                    has_output = True
                    yield TextDelta(event.delta)
                elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                    has_output = True
                    yield ReasoningDelta(event.delta)
                elif kind == "response.output_item.done" and getattr(event.item, "type", "") == "function_call":
                    calls.append(ToolCall(event.item.call_id, event.item.name, event.item.arguments or ""))
                    yield calls[-1]
                elif kind == "response.completed":
                    yield Finish("tool-calls" if calls else "stop", _usage(event.response))
                elif kind == "response.incomplete":
                    yield Finish("length", _usage(event.response))
                elif kind in ("response.failed", "error"):
                    raise ProviderError(cause="response_failed")
                yield Progress(sequence)
        except (openai.APIError, httpx.HTTPError) as exc:
            logger.warning("openai responses stream failed: %s", type(exc).__name__)
            raise _provider_error(exc, has_output=has_output) from None

    async def retrieve(self, operation_id: str) -> OperationResult:
        """Read a background response: its status, text, reasoning, tool calls and usage."""
        try:
            response = await self.client.responses.retrieve(operation_id)
        except openai.NotFoundError:
            return OperationResult("unknown")
        except (openai.APIError, httpx.HTTPError) as exc:
            raise _provider_error(exc, has_output=False) from None
        status = {"queued": "in_progress", "in_progress": "in_progress", "completed": "completed"}.get(
            response.status or "", "cancelled" if response.status == "cancelled" else "failed"
        )
        text, reasoning, calls = "", "", []
        for item in response.output or []:
            # The "type" discriminator selects the item; the casts only tell the type checker
            # which member of the SDK's union that is (no runtime import of those classes).
            kind = getattr(item, "type", "")
            if kind == "message":
                message = cast("ResponseOutputMessage", item)
                text += "".join(getattr(c, "text", "") or "" for c in message.content or [])
            elif kind == "reasoning":
                summary = cast("ResponseReasoningItem", item).summary
                reasoning += "".join(getattr(s, "text", "") or "" for s in summary or [])
            elif kind == "function_call":
                call = cast("ResponseFunctionToolCall", item)
                calls.append(ToolCall(call.call_id, call.name, call.arguments or ""))
        reason = "tool-calls" if calls else "stop"
        return OperationResult(status, text, reasoning, calls, reason, _usage(response))

    async def cancel(self, operation_id: str) -> str:
        """Cancel a background response: ``cancelled``, ``already_finished`` or ``unknown``."""
        try:
            response = await self.client.responses.cancel(operation_id)
        except openai.NotFoundError:
            return "unknown"
        except (openai.APIError, httpx.HTTPError) as exc:
            raise _provider_error(exc, has_output=False) from None
        return "cancelled" if response.status == "cancelled" else "already_finished"


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    return {} if usage is None else _counts(usage, "input_tokens", "output_tokens")


def _counts(usage: Any, input_name: str, output_name: str) -> dict[str, int]:
    """Return a usage object's ``{inputTokens, outputTokens, reasoningTokens?, cachedTokens?}``.

    Chat Completions names them ``prompt_tokens`` / ``completion_tokens`` with
    ``*_tokens_details``; the Responses API ``input_tokens`` / ``output_tokens`` with the same
    details (``reasoning_tokens`` of the output, ``cached_tokens`` of the input).
    """
    counts = {
        "inputTokens": int(getattr(usage, input_name, 0) or 0),
        "outputTokens": int(getattr(usage, output_name, 0) or 0),
    }
    prefix_in, prefix_out = input_name.removesuffix("_tokens"), output_name.removesuffix("_tokens")
    reasoning = getattr(getattr(usage, f"{prefix_out}_tokens_details", None), "reasoning_tokens", None)
    cached = getattr(getattr(usage, f"{prefix_in}_tokens_details", None), "cached_tokens", None)
    if reasoning:
        counts["reasoningTokens"] = int(reasoning)
    if cached:
        counts["cachedTokens"] = int(cached)
    return counts
