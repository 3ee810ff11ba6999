"""Every helix surface of a live host site, walked by one actor, and the rules every answer keeps.

:func:`walk` calls each surface (the chat route, the AI SDK routes, the raw stream route,
the WebSocket, the REST views, the recovery routes, the schema) as an :class:`Actor` on one
session and returns an :class:`Answer` per surface. :func:`assert_well_formed` holds for
every answer on every profile: never a 5xx; a refusal is typed JSON ``{error, code,
retryable}`` (a WebSocket refusal the typed error frame and close ``4000 + status``); a
JSON body is helix's own (never a host renderer's envelope) and its timestamps are ISO 8601
with an offset or ``Z``; exactly one ``Cache-Control``, with ``no-store``, on every answer
helix makes but the schema it serves (the same for every caller).
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed

from tests.host.sites import PREFIX, HostSite, close_code, new_session_id, user_message

OWNER_ACTIONS = ("regenerate", "continue", "keep", "discard")
TERMINAL_FRAMES = ("end", "fail", "error", "cancelled")
TIMESTAMP_KEY = re.compile(r"(At|_at)$")


@dataclass
class Answer:
    """One surface's answer: an HTTP response, or a WebSocket's frames and close code."""

    surface: str
    status: int
    headers: httpx.Headers | None = None
    body: Any = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    close: int | None = None

    @property
    def code(self) -> str | None:
        """The typed error code of a refusal (JSON body or error frame), else None."""
        if self.frames:
            return next((f.get("code") for f in self.frames if f.get("type") == "error"), None)
        return self.body.get("code") if isinstance(self.body, dict) else None


@dataclass
class Actor:
    """Who calls: a JWT user of the site, or an anonymous browser (an httpx.Client keeping its cookies)."""

    site: HostSite
    user: str | None = None
    client: httpx.Client | None = None
    headers: dict[str, str] = field(default_factory=dict)
    ws_scheme_headers: dict[str, str] = field(default_factory=dict)

    def http(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One HTTP request, read whole, never following a redirect."""
        headers = {**self.headers, **kwargs.pop("headers", {})}
        if self.client is None:
            return self.site.request(method, path, self.user, headers=headers, follow_redirects=False, **kwargs)
        if method != "GET" and "csrftoken" in self.client.cookies:
            headers.setdefault("X-CSRFToken", self.client.cookies["csrftoken"])
            headers.setdefault("Referer", self.site.url("/"))
        return self.client.request(method, self.site.url(path), headers=headers, follow_redirects=False, **kwargs)

    def ws_headers(self) -> dict[str, str]:
        """The handshake's headers: the actor's own, its cookies and the site's Origin."""
        headers = {**self.headers, "Origin": self.site.url("").rstrip("/")}
        if self.client is not None and self.client.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.client.cookies.items())
        return headers


def chat_body(session_id: str, text: str) -> dict[str, Any]:
    """``DefaultChatTransport``'s send body with one new user message."""
    return {"id": session_id, "trigger": "submit-message", "messages": [user_message(text)]}


def answer_of(surface: str, response: httpx.Response) -> Answer:
    """The :class:`Answer` of an HTTP response (its JSON body parsed when it is JSON)."""
    body: Any = response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
    return Answer(surface, response.status_code, response.headers, body)


def ws_answer(actor: Actor, surface: str, session_id: str, message: dict[str, Any] | None) -> Answer:
    """Open the session's socket, send ``message`` and read its frames to a terminal (or the server's close).

    ``status`` is ``close - 4000`` for a socket the server closed with a typed refusal, else 200.
    """
    frames: list[dict[str, Any]] = []
    with actor.site.ws(session_id, actor.user, headers=actor.ws_headers()) as ws:
        if message is not None:
            with contextlib.suppress(ConnectionClosed):  # refused at once: its frame is still to be read
                ws.send(json.dumps(message))
        try:
            while True:
                frame = json.loads(ws.recv(timeout=20))
                frames.append(frame)
                if frame.get("type") in TERMINAL_FRAMES:
                    break
        except ConnectionClosed:  # closed by the server: the close code says why
            pass
        code = close_code(ws, timeout=1) if not frames or frames[-1].get("type") == "error" else None
    refused = code is not None and code >= 4000
    return Answer(surface, code - 4000 if refused else 200, frames=frames, close=code)


def send(actor: Actor, surface: str, session_id: str, text: str) -> Answer:
    """A new user message on one send surface: ``chat send``, ``ai sdk send`` or ``ws send``."""
    if surface == "ws send":
        return ws_answer(actor, surface, session_id, {"type": "send", "messages": [user_message(text)]})
    path = f"{PREFIX}/sessions/{session_id}/chat" if surface == "chat send" else f"{PREFIX}/chat"
    return answer_of(surface, actor.http("POST", path, json=chat_body(session_id, text)))


def reads(actor: Actor, session_id: str, run_id: str) -> list[Answer]:
    """Every GET of a session's surfaces (the streams from their start), and the socket's resume."""
    base = f"{PREFIX}/sessions/{session_id}"
    gets = {
        "chat resume": (f"{base}/chat", {"X-Resume-From-Sequence": "0"}),
        "chat resume, no cursor": (f"{base}/chat", {}),
        "ai sdk reconnect": (f"{PREFIX}/chat/{session_id}/stream", {}),
        "raw stream": (f"{base}/stream", {}),
        "session": (f"{base}/", {}),
        "snapshot": (f"{base}/snapshot", {}),
        "runs": (f"{base}/runs/", {}),
        "recovery": (f"{base}/runs/{run_id}/recovery", {}),
    }
    answers = [answer_of(name, actor.http("GET", path, headers=headers)) for name, (path, headers) in gets.items()]
    answers.append(ws_answer(actor, "ws resume", session_id, {"type": "resume", "from_sequence": 0}))
    return answers


def writes(actor: Actor, session_id: str, run_id: str) -> list[Answer]:
    """Every POST on an ended run: cancel, a tool result, the owner recovery actions, and the socket's cancel."""
    run = f"{PREFIX}/sessions/{session_id}/runs/{run_id}"
    tool_result = {"results": [{"toolCallId": "call_unknown", "output": {"ok": True}}]}
    answers = [
        answer_of("cancel", actor.http("POST", f"{run}/cancel", json={})),
        answer_of("tool-results", actor.http("POST", f"{run}/tool-results", json=tool_result)),
    ]
    answers += [answer_of(action, actor.http("POST", f"{run}/{action}", json={})) for action in OWNER_ACTIONS]
    answers.append(ws_answer(actor, "ws cancel", session_id, {"type": "cancel", "run_id": run_id}))
    return answers


def lists(actor: Actor) -> list[Answer]:
    """The session list, a created session and its deletion, and the schema."""
    created_id = new_session_id()
    created = answer_of("create", actor.http("POST", f"{PREFIX}/sessions/", json={"id": created_id}))
    return [
        answer_of("sessions", actor.http("GET", f"{PREFIX}/sessions/")),
        created,
        answer_of("delete", actor.http("DELETE", f"{PREFIX}/sessions/{created_id}/")),
        answer_of("schema", actor.http("GET", f"{PREFIX}/schema/?format=json")),
    ]


def claims(actor: Actor, session_id: str) -> list[Answer]:
    """A delete of the session and a create of its id (``claim``): what a stranger tries on another's session."""
    return [
        answer_of("delete it", actor.http("DELETE", f"{PREFIX}/sessions/{session_id}/")),
        answer_of("claim", actor.http("POST", f"{PREFIX}/sessions/", json={"id": session_id})),
    ]


def wrong_methods(actor: Actor, session_id: str, run_id: str) -> list[Answer]:
    """A ``PUT`` on every route (none takes one): a typed 405, or the host policy's refusal.

    The REST views run the policy first (DRF's order), the chat, AI SDK and raw stream routes
    refuse the method first (docs/transport.md): either is a typed 4xx.
    """
    base, run = f"{PREFIX}/sessions/{session_id}", f"{PREFIX}/sessions/{session_id}/runs/{run_id}"
    paths = [f"{base}/chat", f"{PREFIX}/chat", f"{PREFIX}/chat/{session_id}/stream", f"{base}/stream", f"{base}/"]
    paths += [f"{base}/snapshot", f"{base}/runs/", f"{run}/cancel", f"{run}/recovery", f"{PREFIX}/sessions/"]
    return [answer_of(f"PUT {path}", actor.http("PUT", path, json={})) for path in paths]


def walk(actor: Actor, session_id: str, run_id: str) -> list[Answer]:
    """Every surface on one session as ``actor``: the reads, the writes on ``run_id``, the lists."""
    return [*reads(actor, session_id, run_id), *writes(actor, session_id, run_id), *lists(actor)]


def assert_well_formed(answer: Answer, *, redirects: bool = False) -> None:
    """The rules of every answer (module docstring); a 301 only where the host redirects (``redirects``)."""
    where = (answer.surface, answer.status, answer.body if answer.headers else answer.frames[-3:])
    assert answer.status < 500, where
    if answer.headers is None:
        assert answer.frames, (*where, answer.close)
        for frame in answer.frames:
            if frame.get("type") == "error":
                assert_typed(frame, where)
        if answer.close is not None:
            assert answer.frames[-1]["type"] == "error", where
        return
    if 300 <= answer.status < 400:
        assert redirects and answer.status == 301, where
        assert answer.headers["location"].startswith("https://"), where
        return
    values = answer.headers.get_list("cache-control")
    if not (answer.surface == "schema" and answer.status == 200):  # the schema is the same for every caller
        assert len(values) == 1 and "no-store" in values[0], (*where[:2], values)
    if answer.status >= 400:
        assert isinstance(answer.body, dict), where
        assert_typed(answer.body, where)
    if answer.status == 429:
        assert int(answer.headers["retry-after"]) >= 1, where
    if isinstance(answer.body, (dict, list)):
        assert not (isinstance(answer.body, dict) and set(answer.body) == {"data"}), where
        assert_iso_timestamps(answer.body, where)


def assert_typed(body: dict[str, Any], where: Any) -> None:
    """``{error, code, retryable}``: a message, a code and whether a retry may succeed."""
    assert isinstance(body.get("error"), str) and isinstance(body.get("code"), str), where
    assert isinstance(body.get("retryable"), bool), where


def assert_iso_timestamps(body: Any, where: Any) -> None:
    """Every ``...At`` / ``..._at`` string of ``body`` is ISO 8601 with an offset or ``Z``."""
    if isinstance(body, list):
        for item in body:
            assert_iso_timestamps(item, where)
    elif isinstance(body, dict):
        for key, value in body.items():
            if TIMESTAMP_KEY.search(key) and isinstance(value, str):
                stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
                assert stamp.tzinfo is not None, (key, value, where)
            else:
                assert_iso_timestamps(value, where)
