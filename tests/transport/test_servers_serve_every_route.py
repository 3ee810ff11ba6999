"""Every helix route over both supported ASGI servers, daphne and uvicorn (issue 23, docs/deploy.md).

One server of each kind for the module (``tests/live.py``: uvicorn with uvloop, httptools and
websockets-sansio). Each test runs on both: the chat route's send and resume, the raw stream
route, the AI SDK default routes, the WebSocket send and resume, a client leaving mid-stream
(its response ends, the run and a second reader do not), typed JSON refusals (a bad body,
a disallowed ``Host``) and heartbeats on an idle stream.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect

from helix_django.models import LIVE_STATUSES, Run, RunStatus
from tests.live import SERVERS, LiveServer
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

# ``servers``: scripts/test.sh runs this module in its first pass only (the wire, not the database).
pytestmark = [pytest.mark.slow, pytest.mark.servers, pytest.mark.django_db(transaction=True)]

SLOW_TEXT = "one two three"
HEARTBEAT_SECONDS = 0.2
RULES = [
    {"MATCH": "^idle$", "TEXT": SLOW_TEXT, "PACE_TPS": 2},  # 0.5 s between tokens: heartbeats in between
    {"MATCH": "^leave early$", "PACE_TPS": 40},  # 1.5 s: time for a reader to leave mid-answer
]


@pytest.fixture(scope="module", params=SERVERS)
def server(request, django_db_setup, django_db_blocker):
    """One server of each kind (``ALLOWED_HOSTS``: loopback only), shared by the module's tests."""
    with django_db_blocker.unblock():
        live = LiveServer(
            server=request.param,
            settings_module="tests.transport.servers_settings",
            helix={
                **agent_settings(TEXT=REPLY, PACE_TPS=150, RULES=RULES),
                "HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
                "MAX_REQUEST_BYTES": 20_000,
            },
        )
        live.start()
    yield live
    live.stop()


@pytest.fixture
def client(users, server):
    """User a's token client; waits at teardown for the runs a test left live (the next flush must not race them)."""
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client
    for _ in range(300):
        if not Run.objects.filter(status__in=LIVE_STATUSES).exists():
            return
        time.sleep(0.02)


def finished_run(session_id: str) -> Run:
    """Wait for the session's latest run to end; return it."""
    for _ in range(400):
        run = Run.objects.filter(session_id=session_id).order_by("-created_at").first()
        if run is not None and run.status not in LIVE_STATUSES:
            return run
        time.sleep(0.02)
    raise AssertionError("the run did not end")


def cookie_of(user) -> dict[str, str]:
    """The handshake headers of a signed-in browser page on the server's own origin."""
    django_client = Client()
    django_client.force_login(user)
    cookie = django_client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}", "Origin": "http://127.0.0.1"}


def test_a_send_streams_to_done_and_a_resume_continues_from_its_cursor(server, client):
    sid = new_session_id()
    sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    assert sent.status == 200 and sent.done and sent.text == REPLY
    assert sent.headers["content-type"].startswith("text/event-stream")
    assert sent.headers["x-vercel-ai-ui-message-stream"] == "v1"
    ids = [int(e.id) for e in sent.events if e.id]
    assert ids == sorted(set(ids)) and len(ids) == len(sent.chunks)
    assert finished_run(sid).status == RunStatus.COMPLETED
    middle = sent.events[10]
    rest = read_sse(client, "GET", chat_url(server, sid), headers={"Last-Event-ID": middle.id})
    assert rest.status == 200 and rest.done
    assert all(int(e.id) > int(middle.id) for e in rest.events if e.id)
    assert "".join(e.chunk.get("delta", "") for e in sent.events[:11] if e.chunk) + rest.text == REPLY


def test_the_raw_stream_route_serves_frames_and_the_end(server, client):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    finished_run(sid)
    full = read_sse(client, "GET", server.url(f"{PREFIX}/sessions/{sid}/stream"))
    assert full.status == 200
    frames = [e.chunk for e in full.events if e.event == "message"]
    assert all(f["type"] == "chunk" for f in frames)
    assert "".join(f["chunk"].get("delta", "") for f in frames if f["chunk"]["type"] == "text-delta") == REPLY
    assert full.events[-1].event == "end" and full.events[-1].chunk == {"type": "end", "status": "completed"}


def test_the_ai_sdk_default_routes_send_and_reconnect(server, client):
    sid = new_session_id()
    dropped = read_sse(
        client, "POST", server.url(f"{PREFIX}/chat"), json=send_body(sid, [user_message("hi")]), stop_after=3
    )
    assert dropped.status == 200 and not dropped.done
    reconnected = read_sse(client, "GET", server.url(f"{PREFIX}/chat/{sid}/stream"))
    assert reconnected.status == 200 and reconnected.done and reconnected.text == REPLY
    finished_run(sid)
    assert read_sse(client, "GET", server.url(f"{PREFIX}/chat/{sid}/stream")).status == 204
    assert read_sse(client, "GET", server.url(f"{PREFIX}/chat/{new_session_id()}/stream")).status == 204


def test_the_websocket_sends_and_resumes_from_a_cursor(server, users):
    user, headers = users["a"]
    sid = new_session_id()
    assert httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=headers).status_code == 201
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    with connect(url, additional_headers=cookie_of(user)) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        run = json.loads(ws.recv(timeout=10))
        assert run["type"] == "run"
        first = [json.loads(ws.recv(timeout=10)) for _ in range(5)]
    cursor = first[-1]["sequence"]
    with connect(url, additional_headers=cookie_of(user)) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))
        rest = []
        while not rest or rest[-1]["type"] not in ("end", "fail", "error"):
            rest.append(json.loads(ws.recv(timeout=10)))
    assert rest[-1] == {"type": "end", "status": "completed"}
    chunks = [f for f in first + rest if f["type"] == "chunk"]
    assert [f["sequence"] for f in chunks] == sorted({f["sequence"] for f in chunks})
    assert "".join(f["chunk"].get("delta", "") for f in chunks if f["chunk"]["type"] == "text-delta") == REPLY


def test_the_websocket_refuses_a_bad_message_with_a_typed_error(server, users):
    user, headers = users["a"]
    sid = new_session_id()
    httpx.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=headers)
    with connect(f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/", additional_headers=cookie_of(user)) as ws:
        ws.send("{not json")
        error = json.loads(ws.recv(timeout=5))
    assert error["type"] == "error" and error["code"] == "validation_error" and error["cause"] == "json"


def test_a_client_that_leaves_mid_stream_ends_only_its_own_response(server, client, users):
    sid = new_session_id()
    body = send_body(sid, [user_message("leave early")])
    with client.stream("POST", chat_url(server, sid), json=body) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        while not next(lines).startswith("id:"):
            pass
        second: dict = {}
        reader = threading.Thread(target=lambda: second.update(result=read_sse(client, "GET", chat_url(server, sid))))
        reader.start()
        time.sleep(0.2)  # the second reader is attached before the first one leaves
    assert Run.objects.get(session_id=sid).status in LIVE_STATUSES  # it left mid-answer
    reader.join(20)
    assert second["result"].done and second["result"].text == REPLY
    assert finished_run(sid).status == RunStatus.COMPLETED
    assert read_sse(client, "GET", server.url(f"{PREFIX}/sessions/{sid}/snapshot")).body["runStatus"] == "completed"


def test_a_bad_body_is_a_typed_400(server, client):
    sid = new_session_id()
    response = client.post(chat_url(server, sid), content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and response.json()["cause"] == "json"
    assert not Run.objects.filter(session_id=sid).exists()


def test_an_oversized_body_is_a_typed_413(server, client):
    sid = new_session_id()
    big = send_body(sid, [user_message("x" * 30_000)])
    response = client.post(chat_url(server, sid), json=big)
    assert response.status_code == 413
    assert response.json()["code"] == "validation_payload_too_large" and response.json()["limitBytes"] == 20_000


def websocket_handshake_status(server: LiveServer, path: str, headers: dict[str, str]) -> int:
    """Send a WebSocket upgrade with exactly ``headers`` (a client library adds its own Host); return the status."""
    lines = [f"GET {path} HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13"]
    lines += ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status_line = sock.makefile("rb").readline().decode("latin-1")
    return int(status_line.split()[1])


def test_a_disallowed_host_is_a_typed_400_and_no_websocket(server, client, users):
    sid = new_session_id()
    evil = {"Host": "evil.example"}
    response = client.post(chat_url(server, sid), json=send_body(sid, [user_message("hi")]), headers=evil)
    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and response.json()["cause"] == "host"
    assert client.get(chat_url(server, sid), headers=evil).status_code == 400
    assert not Run.objects.filter(session_id=sid).exists()
    assert client.post(server.url(f"{PREFIX}/sessions/"), json={"id": sid}).status_code == 201
    path = f"/ws{PREFIX}/sessions/{sid}/"
    ws_headers = cookie_of(users["a"][0])
    assert websocket_handshake_status(server, path, {**ws_headers, "Host": f"127.0.0.1:{server.port}"}) == 101
    assert websocket_handshake_status(server, path, {**ws_headers, "Host": "evil.example"}) == 403


def test_an_idle_stream_gets_heartbeats(server, client):
    sid = new_session_id()
    lines = []
    body = send_body(sid, [user_message("idle")])
    with client.stream("POST", chat_url(server, sid), json=body) as response:
        assert response.status_code == 200
        lines = list(response.iter_lines())
    assert lines[0] == ": stream-open"
    assert lines.count(": keep-alive") >= 2  # three tokens 0.5 s apart, heartbeats every 0.2 s of silence
    assert lines[-2:] == ["data: [DONE]", ""] or lines[-1] == "data: [DONE]"
