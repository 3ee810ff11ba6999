"""A ``HEAD`` response carries no body bytes, however long the ``GET`` body would be, on daphne and uvicorn.

Daphne writes each ASGI body message with ``twisted.web.http.Request.write(self, ...)``,
the class's method: Twisted's ``HEAD`` guard (it replaces the instance's ``write`` after the
headers) then drops only the first message. Django sends a body in 64 KiB messages, so a
``HEAD`` of a snapshot of 200 KB got its headers and then the last 136 KB of the
conversation, read by the client (or a proxy's pooled upstream connection) as the start
of its next response. Both servers must send the headers alone (RFC 9110, 9.3.2).
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.live import SERVERS
from tests.transport.conftest import PREFIX, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LONG_TEXT = "x" * 200_000
"""A user message whose snapshot takes four of Django's 64 KiB body messages."""


def read_for(sock: socket.socket, seconds: float) -> bytes:
    """Return every byte ``sock`` receives until it stays quiet for ``seconds`` (or closes)."""
    sock.settimeout(seconds)
    data = b""
    while True:
        try:
            part = sock.recv(1 << 20)
        except TimeoutError:
            return data
        if not part:
            return data
        data += part


def request(method: str, path: str, auth: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n\r\n".encode()


@pytest.mark.parametrize("server_name", SERVERS)
def test_a_head_of_a_long_snapshot_sends_its_headers_only(server_name, daphne_server_factory, users):
    server = daphne_server_factory(server=server_name)
    auth = users["a"][1]["Authorization"]
    sid = f"chat_head_{server_name}"
    with httpx.Client(headers=users["a"][1], timeout=30) as client:
        body = send_body(sid, [user_message(LONG_TEXT)])
        with client.stream("POST", server.url(f"{PREFIX}/sessions/{sid}/chat"), json=body) as sent:
            assert sent.status_code == 200
            sent.read()
        full = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot"))
        assert full.status_code == 200 and len(full.content) > 3 * 65536
    path = f"{PREFIX}/sessions/{sid}/snapshot"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(request("HEAD", path, auth))
        answer = read_for(sock, 1.5)
        head, _, after = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert f"content-length: {len(full.content)}".encode() in head.lower(), head
        assert after == b"", f"{len(after)} body bytes after a HEAD's headers: {after[:60]!r}"
        # The connection stays usable: the next response on it starts with its own status line.
        sock.sendall(request("GET", f"{PREFIX}/sessions/", auth))
        started = time.monotonic()
        following = read_for(sock, 1.5)
        assert following.startswith(b"HTTP/1.1 200"), (following[:80], time.monotonic() - started)
