"""The raw stream route and the WebSocket over daphne: frames, cursors, terminals, send and cancel."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect

from helix_django.models import Message, Run, RunStatus
from tests.transport.conftest import (
    PREFIX,
    REPLY,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def stream_url(server, sid):
    return server.url(f"{PREFIX}/sessions/{sid}/stream")


def cookie_of(user) -> dict:
    client = Client()
    client.force_login(user)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"}


def ws_frames(ws, *, until=("end", "fail", "error")):
    frames = []
    while True:
        frame = json.loads(ws.recv(timeout=10))
        frames.append(frame)
        if frame["type"] in until:
            return frames


def text_of(frames):
    return "".join(
        f["chunk"].get("delta", "") for f in frames if f["type"] == "chunk" and f["chunk"]["type"] == "text-delta"
    )


@pytest.fixture
def a_client(users):
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client


def test_raw_stream_frames_and_cursor(shared_server, a_client):
    sid = new_session_id()
    read_sse(a_client, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]))
    for _ in range(100):
        if Run.objects.get(session_id=sid).status == RunStatus.COMPLETED:
            break
        time.sleep(0.02)
    full = read_sse(a_client, "GET", stream_url(shared_server, sid))
    assert full.status == 200 and "x-vercel-ai-ui-message-stream" not in full.headers
    chunk_events = [e for e in full.events if e.event == "message"]
    assert all(int(e.id) == e.chunk["sequence"] and e.chunk["type"] == "chunk" for e in chunk_events)
    assert full.events[-1].event == "end" and full.events[-1].chunk == {"type": "end", "status": "completed"}
    text = "".join(e.chunk["chunk"].get("delta", "") for e in chunk_events if e.chunk["chunk"]["type"] == "text-delta")
    assert text == REPLY
    assert not any("_run" in e.chunk["chunk"] or e.chunk["chunk"]["type"].startswith("helix-") for e in chunk_events)
    middle = chunk_events[20].id
    rest = read_sse(a_client, "GET", stream_url(shared_server, sid), headers={"Last-Event-ID": middle})
    assert [e.id for e in rest.events if e.event == "message"] == [e.id for e in chunk_events[21:]]
    assert rest.events[-1].event == "end"


def test_raw_stream_of_a_failed_run_ends_with_fail(daphne_server_factory, a_client):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, FAIL_AFTER_CHUNKS=3))
    sid = new_session_id()
    read_sse(a_client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    result = read_sse(a_client, "GET", stream_url(server, sid))
    assert result.events[-1].event == "fail"
    fail = result.events[-1].chunk
    assert fail["type"] == "fail" and fail["recoverable"] is False
    assert fail["errorDetail"]["code"] == "provider_error"


def test_raw_stream_of_an_unknown_stream_is_404(shared_server, a_client):
    response = a_client.get(stream_url(shared_server, new_session_id()))
    assert response.status_code == 404 and response.json()["error"] == "Stream not found"
    created = a_client.post(shared_server.url(f"{PREFIX}/sessions/"), json={"id": "chat_nostream"})
    assert created.status_code == 201
    response = a_client.get(stream_url(shared_server, "chat_nostream"))
    assert response.status_code == 404 and response.json()["error"] == "Stream not found"


def test_websocket_send_reconnect_from_cursor_gets_every_later_chunk_once(daphne_server_factory, users):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, PACE_TPS=100))
    a_user, headers = users["a"]
    created = httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": "chat_ws"}, headers=headers)
    assert created.status_code == 201
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/chat_ws/"
    with connect(url, additional_headers=cookie_of(a_user)) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        run = json.loads(ws.recv(timeout=10))
        assert run["type"] == "run" and run["isDuplicate"] is False
        first = []
        while len(first) < 10:
            frame = json.loads(ws.recv(timeout=10))
            first.append(frame)
    # The socket closed mid-run; the run goes on. Reconnect from the last sequence held.
    cursor = first[-1]["sequence"]
    with connect(url, additional_headers=cookie_of(a_user)) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))
        rest = ws_frames(ws)
    assert rest[-1] == {"type": "end", "status": "completed"}
    sequences = [f["sequence"] for f in first + rest if f["type"] == "chunk"]
    assert sequences == sorted(set(sequences))
    assert text_of(first) + text_of(rest) == REPLY
    reply = Message.objects.get(session_id="chat_ws", role="assistant")
    assert reply.text == REPLY


def test_websocket_bad_messages_and_cancel(daphne_server_factory, users):
    server = daphne_server_factory(
        helix=agent_settings(tools=["pick_color"], TOOL_CALLS=[{"name": "pick_color", "arguments": {"prompt": "p"}}])
    )
    a_user, headers = users["a"]
    httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": "chat_ws2"}, headers=headers)
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/chat_ws2/"
    with connect(url, additional_headers=cookie_of(a_user)) as ws:
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=5))["cause"] == "json"
        ws.send(json.dumps({"type": "launch"}))
        assert json.loads(ws.recv(timeout=5))["cause"] == "message_type"
        ws.send(json.dumps({"type": "resume", "from_sequence": "x"}))
        assert json.loads(ws.recv(timeout=5))["cause"] == "cursor"
        ws.send(json.dumps({"type": "send", "messages": [{"id": "m", "role": "robot", "parts": []}]}))
        assert json.loads(ws.recv(timeout=5))["code"] == "validation_error"
        ws.send(json.dumps({"type": "send", "messages": [user_message("pick")]}))
        run = json.loads(ws.recv(timeout=5))
        frames = ws_frames(ws)
        assert frames[-1] == {"type": "end", "status": "paused"}  # waiting for the browser's tool result
        ws.send(json.dumps({"type": "cancel"}))
        cancelled = json.loads(ws.recv(timeout=5))
        assert cancelled == {"type": "cancelled", "runId": run["runId"], "status": "cancelled"}
    assert Run.objects.get(pk=run["runId"]).status == RunStatus.CANCELLED
