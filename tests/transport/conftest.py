"""Fixtures of the transport tests: the live daphne server, users with tokens, an SSE reader."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from helix_django.testing import new_session_id, read_sse, send_body, user_message  # noqa: F401 - used by the tests here
from tests.streams.conftest import BACKENDS, redis_options

PREFIX = "/helix/api"
REPLY = " ".join(f"word{i}" for i in range(60)) + "."


TOOLBOX = "tests.runtime.toolbox"
TWO_STEPS = [
    {"TEXT": "Let me look. ", "TOOL_CALLS": [{"name": "lookup", "arguments": {"city": "Oslo"}, "id": "call_lookup"}]},
    {"TEXT": REPLY},
]


def agent_settings(tools: list[str] | None = None, max_attempts: int = 1, **options: Any) -> dict[str, Any]:
    """HELIX overrides: the default agent on the scripted provider with ``options`` and ``tools`` (names in toolbox)."""
    return {
        "AGENTS": {
            "default": {
                "PROVIDER": {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider", "OPTIONS": options},
                "MODEL": "scripted-1",
                "SYSTEM_PROMPT": "You are a test.",
                "TOOLS": [f"{TOOLBOX}.{name}" for name in tools or []],
                "MAX_STEPS": 4,
                "MAX_ATTEMPTS": max_attempts,
            }
        }
    }


@pytest.fixture
def users(transactional_db):
    """Two users, ``a`` and ``b``, with DRF tokens: ``{"a": (user, headers), "b": ...}``."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    out = {}
    for name in ("a", "b"):
        user = get_user_model().objects.create_user(username=f"user-{name}", password="pw-not-secret")
        token = Token.objects.create(user=user)
        out[name] = (user, {"Authorization": f"Token {token.key}"})
    return out


@pytest.fixture(params=sorted(BACKENDS))
def backend(request):
    """``(name, STREAM_MANAGERS entry)`` of each stream manager backend (the store is the test database)."""
    from helix_django.streams import reset_stream_managers

    manager = dict(BACKENDS[request.param])
    if request.param == "redis":
        manager["OPTIONS"] = redis_options()
    reset_stream_managers()
    yield request.param, manager
    reset_stream_managers()


def chat_scope(key: str, sid: str, messages: list[dict], request_key: str = "") -> tuple[dict, bytes]:
    """The ASGI scope and body of a DRF-token-authenticated chat POST of ``messages`` to session ``sid``."""
    path = f"{PREFIX}/sessions/{sid}/chat"
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Token {key}".encode()),
            (b"content-type", b"application/json"),
            *([(b"x-helix-request-key", request_key.encode())] if request_key else []),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
        "scheme": "http",
    }
    return scope, json.dumps(send_body(sid, messages)).encode()


def chat_url(server, session_id: str) -> str:
    """Absolute URL of a session's chat route."""
    return server.url(f"{PREFIX}/sessions/{session_id}/chat")


def snapshot_after_first_step(client: httpx.Client, server, session_id: str) -> dict[str, Any]:
    """Poll the snapshot until the run is live with its first step committed."""
    import time

    for _ in range(400):
        snap = client.get(server.url(f"{PREFIX}/sessions/{session_id}/snapshot")).json()
        if snap["status"] == "active" and snap["stepCount"] >= 1:
            return snap
        time.sleep(0.01)
    raise AssertionError("the first step was not committed while the run was live")


@pytest.fixture(scope="module")
def shared_server(django_db_setup, django_db_blocker):
    """One daphne server for a whole module (the scripted reply at 150 words/s).

    Tests using it still need ``transactional_db`` (``users`` brings it), so what they
    write is committed where the server reads it.
    """
    from tests.live import LiveServer

    with django_db_blocker.unblock():
        server = LiveServer(helix={**agent_settings(TEXT=REPLY, PACE_TPS=150), "MAX_REQUEST_BYTES": 20_000})
        server.start()
    yield server
    server.stop()


def layer_server(start_server: Any) -> tuple[Any, str]:
    """Start daphne (``start_server``: the ``daphne_server_factory`` fixture) on the channels_redis
    layer of a fresh key prefix; return (server, prefix).

    This process joins the same layer with ``redis_channel_layer(prefix)`` to claim and
    write streams the server learns about through it.
    """
    prefix = f"helix-t-{uuid.uuid4().hex[:8]}"
    server = start_server(
        settings_module="tests.scale.settings",
        env={"HELIX_TEST_LAYER_PREFIX": prefix},
        helix={"LIVE_WAIT_TIMEOUT_MS": 15_000},
    )
    return server, prefix


def worker_chunks(run: Any, words: list[str]) -> list[dict[str, Any]]:
    """The chunks a worker writes for a one-step text answer of ``words`` (stamped with the run)."""
    step = {"_attempt": "att_1", "_step": 1}
    chunks = [
        {
            "type": "helix-run-start",
            "runId": run.id,
            "kind": "send",
            "attempt": 1,
            "messageId": run.response_message_id,
        },
        {"type": "start", "messageId": run.response_message_id},
        {"type": "start-step", **step},
        {"type": "text-start", "id": "t", **step},
        *({"type": "text-delta", "id": "t", "delta": word, **step} for word in words),
        {"type": "text-end", "id": "t", **step},
        {"type": "finish-step", **step},
        {"type": "finish"},
        {"type": "helix-run-end", "status": "completed"},
    ]
    return [{**chunk, "_run": run.id} for chunk in chunks]


def run_in_start_window(owner_id: int) -> tuple[str, Any]:
    """Return (session id, RunStartResult) of a run whose run-start commit landed, its stream unclaimed."""
    from helix_django import store

    sid = new_session_id()
    store.get_or_create_session(sid, owner_id=owner_id)
    return sid, store.start_run(store.RunStartRequest(session_id=sid, input_messages=[user_message("hi")]))


def ws_terminal(server, session_id: str, headers: dict[str, str], from_sequence: int) -> dict[str, Any]:
    """Resume ``session_id`` on the WebSocket from ``from_sequence``; return its first frame that is not a chunk."""
    from websockets.sync.client import connect

    with connect(f"{server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/", additional_headers=headers) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": from_sequence}))
        while True:
            frame = json.loads(ws.recv(timeout=10))
            if frame["type"] != "chunk":
                return frame


def wait_for_run_status(session_id: str, status: str = "streaming", *, seconds: float = 10.0) -> Any:
    """Poll until the session's first run has ``status``; return that run (the last one read, or None,
    once ``seconds`` passed: the caller's asserts then tell)."""
    import time

    from helix_django.models import Run

    deadline = time.monotonic() + seconds
    while True:
        run = Run.objects.filter(session_id=session_id).first()
        if (run is not None and run.status == status) or time.monotonic() > deadline:
            return run
        time.sleep(0.02)
