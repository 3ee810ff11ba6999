"""A chat client for the fault tests: sends over the real chat route and reads SSE until a point."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from django.utils import timezone
from httpx_sse import EventSource

from helix_django.models import Run

PREFIX = "/helix/api"
REPLY = " ".join(f"word{i}" for i in range(40)) + "."
PROMPT = "SECRET-PROMPT-7f3 tell me about leases"


def agent(options: dict[str, Any], *, tools: list[str] | None = None) -> dict[str, Any]:
    """``HELIX`` overrides: short leases and the default agent on the scripted provider."""
    return {
        "LEASE_SECONDS": 2,
        "LEASE_RENEW_SECONDS": 1,
        "FLUSH_INTERVAL_MS": 5,
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider", "OPTIONS": options},
                "MODEL": "scripted-1",
                "SYSTEM_PROMPT": "You are a test.",
                "TOOLS": tools or [],
                "MAX_STEPS": 4,
            }
        },
    }


def openai_helix(server: Any, *, tools: list[str] | None = None) -> dict:
    """``HELIX`` of a default agent on the OpenAI provider, Responses API background mode, at ``server``."""
    helix = agent({}, tools=tools)
    helix["AGENTS"]["default"]["PROVIDER"] = {
        "BACKEND": "helix_django.runtime.providers.openai.OpenAIProvider",
        "OPTIONS": {"BASE_URL": server.base_url, "API_KEY": "test-key", "API": "responses", "BACKGROUND": True},
    }
    return {**helix, "LEASE_SECONDS": 30, "LEASE_RENEW_SECONDS": 10, "DRAIN_SECONDS": 1}


def creates(server: Any) -> int:
    """How many responses were created (``POST /v1/responses``)."""
    return sum(1 for r in server.requests if r["path"] == "/v1/responses" and r["body"] is not None)


def user_token() -> dict[str, str]:
    """Create a user with a DRF token; return the auth headers."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username=f"u{uuid.uuid4().hex[:8]}", password="pw-not-secret")
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


class LiveChat:
    """One chat session against a live server."""

    def __init__(self, server: Any, headers: dict[str, str], session_id: str | None = None) -> None:
        self.server = server
        self.headers = headers
        self.session_id = session_id or f"chat_{uuid.uuid4().hex[:16]}"
        self.chunks: list[tuple[int, dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return self.server.url(f"{PREFIX}/sessions/{self.session_id}/chat")

    @property
    def text(self) -> str:
        """The text the client has rendered so far."""
        return "".join(c.get("delta", "") for _s, c in self.chunks if c.get("type") == "text-delta")

    def send(
        self,
        text: str = PROMPT,
        *,
        until: Callable[[LiveChat], bool] | None = None,
        message_id: str | None = None,
        edit_of: str | None = None,
        timeout: float = 30.0,
    ) -> bool:
        """POST a user message; read frames until ``until(self)`` holds (True) or the body ends (False).

        ``edit_of`` names the user message this one edits. Without ``until`` the client disconnects as soon as the response headers arrived (a
        disconnect never stops the run); the test then watches the persisted state instead.
        """
        message = {
            "id": message_id or f"u_{uuid.uuid4().hex[:10]}",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }
        body = {"id": self.session_id, "messages": [message], "trigger": "submit-message"}
        if edit_of:  # the AI SDK's edit: the edited message replaces ``edit_of`` and what follows it
            body["messageId"] = edit_of
        return self._read("POST", json=body, until=until or (lambda chat: True), timeout=timeout)

    def persisted(self) -> list[dict[str, Any]]:
        """The chunks the stream manager holds for this session (what survives a process death)."""
        from asgiref.sync import async_to_sync

        from helix_django.streams import get_stream_manager

        return [c for _s, c in async_to_sync(get_stream_manager().read_all)(self.session_id)]

    def persisted_text(self) -> str:
        """Text deltas persisted so far."""
        return "".join(c.get("delta", "") for c in self.persisted() if c.get("type") == "text-delta")

    def wait_for(self, condition: Callable[[LiveChat], bool], *, timeout: float = 30.0) -> None:
        """Poll the persisted state until ``condition(self)`` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self):
                return
            time.sleep(0.02)
        raise AssertionError("condition not reached")

    def resume(self, cursor: int, *, timeout: float = 10.0) -> httpx.Response | list[dict[str, Any]]:
        """GET the chat route from ``cursor``: the JSON error response, or the chunks read."""
        headers = {**self.headers, "X-Resume-From-Sequence": str(cursor)}
        with httpx.Client(timeout=timeout) as client, client.stream("GET", self.url, headers=headers) as response:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                response.read()
                return response
            return [json.loads(e.data) for e in EventSource(response).iter_sse() if e.data and e.data != "[DONE]"]

    def resume_through(self, cursor: int, *, seconds: float = 40.0) -> list[tuple[float, int, dict[str, Any]]]:
        """Resume from ``cursor`` as a client would through a restart, until ``finish``, a final error or a resync.

        A refused or dropped resume (server down, ``run_recovering``, a retryable drop) is
        tried again from the last sequence received. Returns ``(monotonic arrival, sequence,
        chunk)`` of every chunk received (error chunks of retryable drops left out).
        """
        got: list[tuple[float, int, dict[str, Any]]] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            headers = {**self.headers, "X-Resume-From-Sequence": str(got[-1][1] if got else cursor)}
            try:
                with httpx.Client(timeout=30) as client, client.stream("GET", self.url, headers=headers) as response:
                    if "text/event-stream" in response.headers.get("content-type", ""):
                        for sse in EventSource(response).iter_sse():
                            if not sse.data or sse.data == "[DONE]":
                                continue
                            chunk = json.loads(sse.data)
                            if chunk.get("type") == "error" and json.loads(chunk.get("errorText") or "{}").get(
                                "retryable"
                            ):
                                break
                            if sse.id:
                                got.append((time.monotonic(), int(sse.id), chunk))
                            if chunk.get("type") in ("finish", "error", "data-stream-resync"):
                                return got
            except httpx.TransportError:
                pass  # the server is not up yet, or went away: come back
            time.sleep(0.2)
        raise AssertionError(f"the run never ended on the wire ({len(got)} chunks received)")

    def _read(self, method: str, *, until: Callable[[LiveChat], bool], timeout: float, **kwargs: Any) -> bool:
        try:
            with (
                httpx.Client(timeout=timeout) as client,
                client.stream(method, self.url, headers=self.headers, **kwargs) as response,
            ):
                assert response.status_code == 200, (response.status_code, response.read())
                if until(self):
                    return True
                for sse in EventSource(response).iter_sse():
                    if sse.data and sse.data != "[DONE]" and sse.id:
                        self.chunks.append((int(sse.id), json.loads(sse.data)))
                    if until(self):
                        return True
        except httpx.TransportError:
            return False  # the server died under the response
        return False

    def run(self) -> Run:
        """The session's latest run."""
        return Run.objects.filter(session_id=self.session_id).order_by("-created_at").first()


def wait_lease_expired(run: Run, *, timeout: float = 10.0) -> None:
    """Sleep until ``run``'s lease has expired (a dead process renews nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.lease_expires_at is None or run.lease_expires_at < timezone.now() - timedelta(milliseconds=50):
            return
        time.sleep(0.1)
    raise AssertionError("the lease was renewed: the process is not dead")


def wait_until(condition: Callable[[], Any], timeout: float = 40.0) -> Any:
    """Poll ``condition()`` every 50 ms until it returns something truthy; return it (AssertionError at ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached")
