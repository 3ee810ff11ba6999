"""Several processes on one database and Redis: two daphne servers and a task worker, all started here.

The web processes use ``tests/scale/settings.py`` (channels_redis layer, Redis stream
manager) with the TasksExecutor; the worker executes the runs. Runs on the suite's
database (SQLite file or PostgreSQL with HELIX_TEST_DATABASE_URL).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
import websockets
from httpx_sse import EventSource

from tests.scale.workers import Worker

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

PREFIX = "/helix/api"
REPLY = " ".join(f"word{i}" for i in range(60)) + "."
HELIX = {
    "EXECUTOR": "helix_django.runtime.tasks_executor.TasksExecutor",
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": REPLY, "PACE_TPS": 60},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "FLUSH_INTERVAL_MS": 2,
    "LEASE_SECONDS": 5,
    "LEASE_RENEW_SECONDS": 1,
}


@pytest.fixture
def cluster(daphne_server_factory, scale_env):
    """Two daphne processes (A, B) and one task worker, sharing the database, Redis and the layer."""
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": scale_env}
    a, b = daphne_server_factory(**kwargs), daphne_server_factory(**kwargs)
    worker = Worker(HELIX, env=scale_env, settings_module="tests.scale.settings").start()
    yield a, b, worker
    worker.stop()


def user_message(text: str) -> dict:
    return {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": text}]}


def read_sse(client: httpx.Client, method: str, url: str, *, stop_after: int | None = None, **kwargs):
    """Return ``([(sequence, chunk)], cursor)`` of an SSE chat response; stop after ``stop_after`` chunks (a drop).

    A frame with an id and no data (an internal chunk) only moves the cursor.
    """
    out, cursor = [], None
    with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200, response.read()
        for sse in EventSource(response).iter_sse():
            if sse.id:
                cursor = int(sse.id)
            if sse.data in ("", "[DONE]") or not sse.id:
                continue
            out.append((int(sse.id), json.loads(sse.data)))
            if stop_after is not None and len(out) >= stop_after:
                break
    return out, cursor


def text_of(chunks) -> str:
    return "".join(c.get("delta", "") for _s, c in chunks if c.get("type") == "text-delta")


def test_send_on_a_drop_resume_on_b_text_exactly_once(cluster, user_headers):
    a, b, worker = cluster
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    body = {"id": sid, "messages": [user_message("hello")], "trigger": "submit-message"}
    token = {"Authorization": user_headers["Authorization"]}
    with httpx.Client(headers=token, timeout=30) as client:
        first, cursor = read_sse(client, "POST", a.url(f"{PREFIX}/sessions/{sid}/chat"), json=body, stop_after=8)
        assert text_of(first), worker.log_text()[-2000:]
        rest, _ = read_sse(
            client, "GET", b.url(f"{PREFIX}/sessions/{sid}/chat"), headers={"X-Resume-From-Sequence": str(cursor)}
        )
    sequences = [s for s, _c in first + rest]
    assert sequences == sorted(set(sequences))
    assert text_of(first + rest) == REPLY
    assert rest[-1][1]["type"] == "finish"


async def test_a_websocket_on_b_follows_a_run_started_on_a(cluster, user_headers):
    a, b, _worker = cluster
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    body = {"id": sid, "messages": [user_message("hello")], "trigger": "submit-message"}
    token = {"Authorization": user_headers["Authorization"]}
    with httpx.Client(headers=token, timeout=30) as client:
        _first, cursor = await asyncio.to_thread(
            read_sse, client, "POST", a.url(f"{PREFIX}/sessions/{sid}/chat"), json=body, stop_after=1
        )
    url = f"{b.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    frames = []
    cookie = {"Cookie": user_headers["Cookie"]}
    async with websockets.connect(url, additional_headers=cookie, origin=b.base_url) as ws:
        await ws.send(json.dumps({"type": "resume", "from_sequence": cursor - 1}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            frames.append(frame)
            if frame["type"] != "chunk":
                break
    assert frames[-1]["type"] == "end", frames[-1]
    chunks = [(f["sequence"], f["chunk"]) for f in frames if f["type"] == "chunk"]
    assert text_of(chunks) == REPLY
    assert [s for s, _c in chunks] == sorted({s for s, _c in chunks})
