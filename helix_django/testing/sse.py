"""Reading helix's SSE wire as a client does: events with their sequence ids, chunks, typed errors.

Parsing is httpx-sse's (``EventSource``); :func:`read_sse` adds what a browser's
``EventSource`` does and httpx-sse does not: a blank event after a heartbeat comment is no
event, and the last-event-id carried over to an event without an ``id:`` line is not that
event's id. See docs/transport.md for the frames.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx
from httpx_sse import EventSource


@dataclasses.dataclass
class Event:
    """One SSE event: ``id`` (the stream sequence as text; None without an ``id:`` line), ``event``, ``data``."""

    id: str | None
    event: str
    data: str

    @property
    def chunk(self) -> dict[str, Any] | None:
        """The JSON chunk (None for ``[DONE]``); raises ValueError for data that is not JSON."""
        return None if self.data == "[DONE]" else json.loads(self.data)


@dataclasses.dataclass
class WireError:
    """A typed refusal or failure: ``status`` (HTTP; 200 for an error frame inside a stream), ``code``, ``body``.

    ``body`` is the flat error body of docs/transport.md's wire-error table:
    ``{"error", "code", "retryable"?, "cause"?, ...}``.
    """

    status: int
    code: str
    body: dict[str, Any]

    @property
    def retryable(self) -> bool:
        """Whether the body says the request may be retried."""
        return bool(self.body.get("retryable"))


@dataclasses.dataclass
class SSEResult:
    """A response read as SSE (``events``), or its JSON ``body`` for an answer that is not a stream."""

    status: int
    headers: httpx.Headers
    events: list[Event]
    body: Any = None

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """Every chunk, in order (without ``[DONE]``)."""
        return [chunk for event in self.events if (chunk := event.chunk) is not None]

    @property
    def done(self) -> bool:
        """Whether the stream ended with ``[DONE]``."""
        return bool(self.events) and self.events[-1].data == "[DONE]"

    @property
    def sequences(self) -> list[int]:
        """The sequence ids of the events that carried one, in order."""
        return [int(event.id) for event in self.events if event.id]

    @property
    def last_id(self) -> int | None:
        """The last SSE id seen (the client's cursor), None if no event carried one."""
        ids = self.sequences
        return ids[-1] if ids else None

    @property
    def text(self) -> str:
        """The text deltas joined."""
        return "".join(c.get("delta", "") for c in self.chunks if c.get("type") == "text-delta")

    @property
    def error(self) -> WireError | None:
        """The typed error of this answer: its JSON error body (status >= 400) or its first error frame; else None."""
        if self.status >= 400 and isinstance(self.body, dict) and "code" in self.body:
            return WireError(self.status, str(self.body["code"]), self.body)
        for chunk in self.chunks:
            if chunk.get("type") == "error":
                body = json.loads(chunk.get("errorText") or "{}")
                return WireError(self.status, str(body.get("code", "")), body)
        return None


def read_sse(client: httpx.Client, method: str, url: str, *, stop_after: int | None = None, **kwargs: Any) -> SSEResult:
    """Send a request and read its SSE body as it arrives; return the events read.

    ``stop_after`` closes the connection after that many events with an id (a client drop).
    An answer that is not ``text/event-stream`` is read whole: its JSON (or None) is ``body``.
    ``kwargs`` go to ``httpx.Client.stream``. Raises httpx's transport errors.
    """
    with client.stream(method, url, **kwargs) as response:
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.read()
            body = response.json() if response.content else None
            return SSEResult(response.status_code, response.headers, [], body)
        events: list[Event] = []
        count = 0
        previous_id = None
        for sse in EventSource(response).iter_sse():
            if not sse.data:
                # httpx-sse dispatches the blank line after a ``: keep-alive`` comment as an event
                # once an id was seen; a browser's EventSource does not (WHATWG: an empty data
                # buffer is no event).
                continue
            # The SSE last-event-id buffer carries over to events without an ``id:`` line.
            event_id = sse.id if sse.id and sse.id != previous_id else None
            previous_id = sse.id or previous_id
            events.append(Event(event_id, sse.event, sse.data))
            if sse.data != "[DONE]" and event_id:
                count += 1
            if stop_after is not None and count >= stop_after:
                break
        return SSEResult(response.status_code, response.headers, events)
