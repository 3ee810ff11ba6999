"""Fixtures of the adversarial tests: one shared daphne server per module, a slow server, users with tokens."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from tests.streams.conftest import backend_name, manager  # noqa: F401 - a stream manager of every backend
from tests.transport.conftest import PREFIX, REPLY, agent_settings, shared_server, users  # noqa: F401


@pytest.fixture
def slow_server(daphne_server_factory):  # noqa: F811
    """A daphne server replying 60 words at 40 words/s: a run stays live for about 1.5 s."""
    return daphne_server_factory(helix=agent_settings(TEXT=REPLY, PACE_TPS=40))


def wait_idle(client, server, sid: str) -> dict:
    """Poll the session's snapshot until its status is no longer ``active``; return that snapshot.

    ``client`` is an ``httpx.Client`` of the owner. Raises AssertionError after about 10 s.
    """
    for _ in range(500):
        snap = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
        if snap["status"] != "active":
            return snap
        time.sleep(0.02)
    raise AssertionError("the run did not end")


def assert_typed_refusal(
    status: int, body: Any, *, statuses: tuple[int, ...] = (400, 401, 403, 404, 405, 409, 413)
) -> None:
    """Assert a typed 4xx JSON body ``{error, code, retryable, ...}`` with no traceback."""
    assert status in statuses, (status, body)
    assert isinstance(body, dict), body
    assert isinstance(body.get("error"), str) and isinstance(body.get("code"), str), body
    assert "retryable" in body, body
    assert "Traceback" not in json.dumps(body)


PROTOCOL_REFUSALS = {"daphne": b"", "uvicorn": b"Invalid HTTP request received."}
"""The body of the 400 each server sends itself for a request its HTTP parser refuses (no app runs, nothing to type)."""


def protocol_refusal(server) -> tuple[int, bytes]:
    """Return ``(400, body)`` of ``server``'s own refusal of an unparseable request (a NUL in a header, ...)."""
    return 400, PROTOCOL_REFUSALS[server.server]


def httptools_refuses(value: bytes) -> bool:
    """Whether uvicorn's parser (httptools) refuses a header holding ``value``: a control byte other than tab."""
    return any((byte < 0x20 and byte != 0x09) or byte == 0x7F for byte in value)


def raw_request(port: int, data: bytes, *, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes to ``127.0.0.1:port``; return ``(status, headers, body)`` of the first response.

    The body is read up to ``Content-Length`` (or until the server closes).
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            part = sock.recv(65536)
            if not part:
                break
            buf += part
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "-1"))
        while length < 0 or len(rest) < length:
            try:
                part = sock.recv(65536)
            except TimeoutError:
                break
            if not part:
                break
            rest += part
        return status, headers, rest[: length if length >= 0 else None]


@pytest.fixture(autouse=True)
def _runs_end_before_flush(request):
    """After each test, let the servers finish the runs it started before the database is flushed.

    A run still writing while the flush truncates its tables deadlocks on PostgreSQL. Waits
    at most 30 s for runs that are starting, streaming or running tools (a run suspended on
    a client tool waits for the browser and is left alone).
    """
    yield
    if request.node.get_closest_marker("django_db") is None:
        return
    import time

    from helix_django.models import Run, RunStatus

    active = (RunStatus.STARTING, RunStatus.STREAMING, RunStatus.TOOLING)
    deadline = time.monotonic() + 30
    while Run.objects.filter(status__in=active).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
