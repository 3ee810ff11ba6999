"""Stop sent to another process than the one executing the run: the partial answer kept is the one shown.

Seen: two daphne processes (embedded executor, channels_redis layer; the database and the
Redis stream managers alike). The run streams on A; its owner's Stop reaches B
(``POST .../runs/<id>/cancel``), which executes no task for it and ends it "detached"
(``runtime/entries.py::_cancel_detached``): it rebuilds the partial answer from the
stream, commits it and ends the stream, while A's task goes on appending deltas until
the stream's end fences it. The deltas A wrote in between reached every client (A's
send, a resume on B: the same text) but not the committed message: after a reload the
answer is shorter than what the user saw (70 characters on screen, 66 kept).
By the code (not run here), a site whose runs execute on task workers takes the same
detached path on every Stop, as no web process holds the run's task. Expected: the kept
partial is exactly what the clients were sent (000, "Store partial
output explicitly"; the chat route's exactly-once promise across a reload).

Fixed: the detached cancel fences the executing writer before reading its output, as the
relaunch scan does (``recovery/scan.py::fence_writer``: pause the stream as the run, then
``arebuild_partial``), so no delta lands between the read and the stream's end. Live
readers meet the pause as a retryable drop (``transport_stream_drop``, ``cause:
run_recovering``; a resume inside the fence is answered 503 with the same body) and, as
clients do, resume from their cursor into the cancelled ending (``abort`` + ``[DONE]``).
Checked on both processes: A's send (SSE) and WebSocket, B's chat resume (SSE) and raw stream
route; each ends cancelled (``abort`` + ``[DONE]``; ``end cancelled``) with the kept partial's text.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import httpx
import pytest
import websockets

from helix_django.models import Message
from tests.transport.conftest import read_sse, wait_for_run_status

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

PREFIX = "/helix/api"
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": " ".join(f"w{i}" for i in range(3000)), "PACE_TPS": 400},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "FLUSH_INTERVAL_MS": 2,
}


@pytest.fixture(params=["database", "redis"])
def pair(request, daphne_server_factory, scale_env):
    env = dict(scale_env)
    if request.param == "database":
        env.pop("HELIX_TEST_STREAM_PREFIX")
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": env}
    return daphne_server_factory(**kwargs), daphne_server_factory(**kwargs)


def _follow(client, method, url, **kwargs):
    """Read the chat route as a client does: resume from the cursor after a retryable drop; return (text, last events)."""
    text, cursor = "", None
    for _ in range(20):
        headers = {} if cursor is None else {"X-Resume-From-Sequence": str(cursor)}
        if cursor is not None:
            kwargs.pop("json", None)  # a resume: the send is not repeated
        got = read_sse(client, method if cursor is None else "GET", url, headers=headers, **kwargs)
        if got.body is not None and got.body.get("retryable"):  # resumed within the fence (503 run_recovering)
            assert got.body["code"] == "transport_stream_drop", got.body
            time.sleep(0.1)
            continue
        text += got.text
        cursor = got.last_id if got.last_id is not None else cursor
        errors = [e.chunk for e in got.events if e.data != "[DONE]" and e.chunk.get("type") == "error"]
        if got.done or not errors:
            return text, [e.data for e in got.events[-2:]]
        told = json.loads(errors[-1]["errorText"])
        assert (told["code"], told["retryable"]) == ("transport_stream_drop", True), told  # a fence's drop: come back
    raise AssertionError("the response never ended")


def _frames_text(frames):
    return "".join(
        f["chunk"].get("delta", "") for f in frames if f["type"] == "chunk" and f["chunk"].get("type") == "text-delta"
    )


def _follow_raw(client, url, cursor):
    """Read the raw stream route from ``cursor``, resuming after a retryable drop; return (text, terminal frame)."""
    text = ""
    for _ in range(20):
        got = read_sse(client, "GET", url, headers={"X-Resume-From-Sequence": str(cursor)})
        if got.body is not None:  # resumed within the fence (503 run_recovering)
            assert (got.body["code"], got.body["retryable"]) == ("transport_stream_drop", True), got.body
            time.sleep(0.1)
            continue
        frames = [json.loads(e.data) for e in got.events]
        text += _frames_text(frames)
        cursor = max([f["sequence"] for f in frames if f["type"] == "chunk"], default=cursor)
        if frames and frames[-1]["type"] == "fail" and frames[-1].get("recoverable"):
            continue
        return text, frames[-1] if frames else None
    raise AssertionError("the raw stream never ended")


async def _follow_ws(server, sid, cookie, cursor):
    """Follow the WebSocket from ``cursor``, reconnecting after a recoverable ``fail``; return (text, terminal frame)."""
    text = ""
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    for _ in range(20):
        async with websockets.connect(url, additional_headers={"Cookie": cookie}, origin=server.base_url) as ws:
            await ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if frame["type"] != "chunk":
                    break
                text += _frames_text([frame])
                cursor = frame["sequence"]
        is_drop = (frame["type"] == "fail" and frame.get("recoverable")) or (
            frame["type"] == "error" and frame.get("retryable")  # resumed within the fence
        )
        if not is_drop:
            return text, frame
        await asyncio.sleep(0.1)
    raise AssertionError("the WebSocket never ended")


def test_a_stop_on_another_process_keeps_exactly_the_text_the_clients_were_sent(pair, user_headers):
    a, b = pair
    token = {"Authorization": user_headers["Authorization"]}
    seen = {}
    mismatches = []
    for _ in range(3):
        sid = f"chat_{uuid.uuid4().hex[:16]}"
        body = {
            "id": sid,
            "messages": [
                {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": "go"}]}
            ],
            "trigger": "submit-message",
        }
        url = f"{PREFIX}/sessions/{sid}/chat"

        def send(sid=sid, body=body, url=url):
            with httpx.Client(headers=token, timeout=30) as client:
                seen[sid, "a"] = _follow(client, "POST", a.url(url), json=body)

        def resume(sid=sid, url=url):
            with httpx.Client(headers=token, timeout=30) as client:
                seen[sid, "b"] = _follow(client, "GET", b.url(url))

        sender = threading.Thread(target=send)
        sender.start()
        run = wait_for_run_status(sid)
        resumer = threading.Thread(target=resume)
        resumer.start()

        def raw(sid=sid, start=run.start_sequence):
            with httpx.Client(headers=token, timeout=30) as client:
                seen[sid, "raw b"] = _follow_raw(client, b.url(f"{PREFIX}/sessions/{sid}/stream"), start)

        def ws(sid=sid, start=run.start_sequence):
            seen[sid, "ws a"] = asyncio.run(_follow_ws(a, sid, user_headers["Cookie"], start))

        others = [threading.Thread(target=raw), threading.Thread(target=ws)]
        for thread in others:
            thread.start()
        time.sleep(0.5)
        with httpx.Client(headers=token, timeout=30) as client:
            stopped = client.post(b.url(f"{PREFIX}/sessions/{sid}/runs/{run.id}/cancel"))
        assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"
        sender.join(30)
        resumer.join(30)
        for thread in others:
            thread.join(30)
        kept = Message.objects.get(session_id=sid, role="assistant").text
        for where in ("a", "b"):
            text, ending = seen[sid, where]
            assert ending == ['{"type":"abort"}', "[DONE]"], (where, ending)
            if kept != text:
                mismatches.append((where, len(text), len(kept)))
        for where in ("raw b", "ws a"):
            text, ending = seen[sid, where]
            assert ending == {"type": "end", "status": "cancelled"}, (where, ending)
            if kept != text:
                mismatches.append((where, len(text), len(kept)))
    assert mismatches == []
