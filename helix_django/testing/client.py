"""A chat client that speaks helix's wire over HTTP, and the bodies and settings a test needs.

::

    with ChatClient(server.base_url, headers={"Authorization": f"Token {key}"}) as chat:
        sid = new_session_id()
        first = chat.send(sid, "Hello", stop_after=3)      # a client that drops after 3 frames
        rest = chat.resume(sid, from_sequence=first.last_id)
        assert first.text + rest.text == chat.snapshot(sid)["messages"][-1]["parts"][0]["text"]

Routes are docs/transport.md's under ``prefix`` (default ``/helix/api``): the chat route
``sessions/<id>/chat`` (``POST`` sends, ``GET`` resumes after ``X-Resume-From-Sequence``)
and the REST snapshot. Every call answers an :class:`~helix_django.testing.sse.SSEResult`
or JSON; refusals are typed in ``result.error`` (no exception for an HTTP status).
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from helix_django.testing.sse import SSEResult, read_sse

SCRIPTED_PROVIDER = "helix_django.runtime.providers.scripted.ScriptedProvider"


def new_session_id() -> str:
    """Return a client-minted session id (``chat_`` + 16 hex characters)."""
    return f"chat_{uuid.uuid4().hex[:16]}"


def user_message(text: str, message_id: str | None = None) -> dict[str, Any]:
    """Return an AI SDK UIMessage from the user with one text part."""
    return {"id": message_id or f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": text}]}


def send_body(session_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the chat route's body as the AI SDK's ``DefaultChatTransport`` sends it."""
    return {"id": session_id, "messages": messages, "trigger": "submit-message"}


def scripted_agent(
    *, tools: list[str] | None = None, name: str = "default", max_steps: int = 4, **options: Any
) -> dict[str, Any]:
    """Return ``HELIX`` overrides: agent ``name`` on the scripted provider with ``options``.

    ``options`` are the scripted provider's OPTIONS (``TEXT``, ``TOOL_CALLS``, ``STEPS``,
    ``PACE_TPS`` in tokens per second, failures: ``helix_django.runtime.providers.scripted``);
    ``tools`` are import strings of the host's tools.
    """
    agent = {
        "PROVIDER": {"BACKEND": SCRIPTED_PROVIDER, "OPTIONS": options},
        "MODEL": "scripted-1",
        "SYSTEM_PROMPT": "You are a test.",
        "TOOLS": list(tools or []),
        "MAX_STEPS": max_steps,
    }
    return {"AGENTS": {name: agent}}


class ChatClient:
    """An ``httpx.Client`` on one server, with the chat wire's calls.

    ``base_url`` is ``http://host:port`` (``LiveServer.base_url``); ``headers`` go with every
    request (authentication); ``timeout`` is in seconds.
    """

    def __init__(
        self,
        base_url: str,
        *,
        prefix: str = "/helix/api",
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.prefix = "/" + prefix.strip("/")
        self.http = httpx.Client(base_url=base_url, headers=headers or {}, timeout=timeout)

    def path(self, route: str) -> str:
        """Return ``prefix/route``."""
        return f"{self.prefix}/{route.lstrip('/')}"

    def send(
        self,
        session_id: str,
        text: str = "",
        *,
        messages: list[dict[str, Any]] | None = None,
        request_key: str | None = None,
        stop_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> SSEResult:
        """Send one turn (``text`` as a new user message, or ``messages`` whole) and read the stream.

        ``stop_after`` drops the connection after that many sequenced frames; ``request_key``
        is sent as ``X-Helix-Request-Key``.
        """
        body = send_body(session_id, messages if messages is not None else [user_message(text)])
        extra = dict(headers or {})
        if request_key:
            extra["X-Helix-Request-Key"] = request_key
        url = self.path(f"sessions/{session_id}/chat")
        return read_sse(self.http, "POST", url, json=body, headers=extra, stop_after=stop_after)

    def resume(
        self,
        session_id: str,
        *,
        from_sequence: int | None = None,
        stop_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> SSEResult:
        """Resume the session's stream after ``from_sequence`` (the cursor: the last sequence held).

        ``from_sequence=None`` asks for the live run from its start. A session with nothing to
        resume answers 204 (``events`` empty).
        """
        extra = dict(headers or {})
        if from_sequence is not None:
            extra["X-Resume-From-Sequence"] = str(from_sequence)
        url = self.path(f"sessions/{session_id}/chat")
        return read_sse(self.http, "GET", url, headers=extra, stop_after=stop_after)

    def snapshot(self, session_id: str) -> dict[str, Any]:
        """Return the session's snapshot (``GET sessions/<id>/snapshot``); raises httpx.HTTPStatusError on a refusal."""
        response = self.http.get(self.path(f"sessions/{session_id}/snapshot"))
        response.raise_for_status()
        snapshot: dict[str, Any] = response.json()
        return snapshot

    def cancel(self, session_id: str, run_id: str) -> httpx.Response:
        """Stop a run (``POST sessions/<id>/runs/<run_id>/cancel``); return the response."""
        return self.http.post(self.path(f"sessions/{session_id}/runs/{run_id}/cancel"))

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
