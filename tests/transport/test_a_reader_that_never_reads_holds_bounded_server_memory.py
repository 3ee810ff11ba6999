"""A client that opens a replay and never reads costs the server a bounded amount of memory.

Found by the breaker helper (seventeenth session; "bounded work": no request's cost falls on
everyone else). Two causes, seen separately, both fixed:

- the chat route read the whole run into a list before it sent anything and held what it
  had not sent: each idle chat resume of an 8 MB run cost about 15 MB, on any server
  (4 readers: +67 MB under daphne). A plan now reads a page at a time and keeps at most
  ``plan_reads.HELD_CHUNKS`` chunks; the rest is read again while it is sent;
- daphne (the embedded default server) never waited in ASGI ``send``: Twisted buffered
  whatever was written, so the raw stream route and the WebSocket, which read in pages,
  still held the whole backlog per idle reader (4 readers: +31-33 MB). daphne's ``send``
  now waits while the client's buffer is full (``transport.daphne_backpressure``), as
  uvicorn's does.

The bound: four readers hold less than two copies of the stream (measured after the fixes:
+7 to +13 MB on both servers).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time

import pytest
from asgiref.sync import async_to_sync

from tests.transport.conftest import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.servers, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

DELTAS = 8000  # 8000 deltas of 1000 bytes: an 8 MB stream (a few long answers' worth)
READERS = 4
#: Less than two copies of the stream for four readers: a reader's cost must not be its backlog.
BOUND_MB = 16


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def big_finished_stream(owner_id: int) -> str:
    from helix_django import store
    from helix_django.protocol import RUN_KEY
    from helix_django.streams import get_stream_manager

    sid = new_session_id()
    store.get_or_create_session(sid, owner_id=owner_id)
    manager = get_stream_manager()
    user = {"id": f"u-{sid}", "role": "user", "parts": [{"type": "text", "text": "big"}]}
    started = store.start_run(
        store.RunStartRequest(session_id=sid, input_messages=[user], turn_message_id=user["id"], lease_owner="t")
    )
    run = started.run
    async_to_sync(manager.claim_stream)(sid, run.id, epoch=started.checkpoint.id)

    def append(chunks):
        return async_to_sync(manager.append)(sid, run.id, [{**c, RUN_KEY: run.id} for c in chunks])

    append([{"type": "start", "messageId": run.response_message_id}, {"type": "start-step"}])
    append([{"type": "text-start", "id": "t"}])
    for _ in range(DELTAS // 500):
        append([{"type": "text-delta", "id": "t", "delta": "x" * 1000}] * 500)
    end = append(
        [
            {"type": "text-end", "id": "t"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
            {"type": "helix-run-end", "status": "completed"},
        ]
    )
    message = {"id": run.response_message_id, "role": "assistant", "parts": [{"type": "text", "text": "x"}]}
    store.commit_terminal(run.id, "completed", response_message=message, stream_sequence=end[-1])
    async_to_sync(manager.end_stream)(sid, run.id, end_status="completed")
    return sid


def never_reading(port: int, request: bytes, then: bytes = b"") -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    if then:
        sock.recv(512)  # the 101
        sock.sendall(then)
    return sock


def ws_text_frame(text: str) -> bytes:
    payload, mask = text.encode(), os.urandom(4)
    head = (
        bytes([0x81, 0x80 | len(payload)])
        if len(payload) < 126
        else bytes([0x81, 0xFE]) + struct.pack("!H", len(payload))
    )
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


ROUTES = ("chat", "raw", "ws")


def open_reader(route: str, port: int, sid: str, token: str) -> socket.socket:
    host = f"Host: 127.0.0.1:{port}\r\nAuthorization: {token}\r\n"
    if route == "chat":  # a resume inside the finished run: the rest of the run
        return never_reading(
            port, f"GET {PREFIX}/sessions/{sid}/chat HTTP/1.1\r\n{host}X-Resume-From-Sequence: 1\r\n\r\n".encode()
        )
    if route == "raw":  # the session stream from 0
        return never_reading(port, f"GET {PREFIX}/sessions/{sid}/stream HTTP/1.1\r\n{host}\r\n".encode())
    key = base64.b64encode(os.urandom(16)).decode()
    ws = (
        f"GET /ws{PREFIX}/sessions/{sid}/ HTTP/1.1\r\n{host}Origin: http://127.0.0.1:{port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    return never_reading(port, ws.encode(), ws_text_frame(json.dumps({"type": "resume", "from_sequence": 0})))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("server_name", ["daphne", "uvicorn"])
def test_readers_that_never_read_cost_the_server_a_bounded_amount(daphne_server_factory, users, server_name, route):
    user, headers = users["a"]
    server = daphne_server_factory(server=server_name)
    sid = big_finished_stream(user.pk)
    pid = server.process.pid
    time.sleep(1)
    before = rss_mb(pid)
    sockets = [open_reader(route, server.port, sid, headers["Authorization"]) for _ in range(READERS)]
    try:
        peak = before
        for _ in range(10):
            time.sleep(0.5)
            peak = max(peak, rss_mb(pid))
    finally:
        for sock in sockets:
            sock.close()
    assert peak - before < BOUND_MB, f"{READERS} idle {route} readers of an 8 MB stream: {before} -> {peak} MB"


@pytest.mark.parametrize("server_name", ["daphne", "uvicorn"])
def test_one_keep_alive_connection_serves_streamed_responses_one_after_another(
    daphne_server_factory, users, server_name
):
    """Streamed responses on one connection, one after another: each registers its own gate on daphne."""
    import httpx

    user, headers = users["a"]
    server = daphne_server_factory(server=server_name)
    sid = big_finished_stream(user.pk)
    with httpx.Client(headers=headers, timeout=30) as client:
        for _ in range(3):  # the same connection each time (httpx keeps it alive)
            with client.stream("GET", server.url(f"{PREFIX}/sessions/{sid}/stream")) as response:
                assert response.status_code == 200
                received = sum(len(part) for part in response.iter_bytes())
            assert received > DELTAS * 1000
        answer = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot"))
        assert answer.status_code == 200 and answer.json()["messages"][-1]["role"] == "assistant"
