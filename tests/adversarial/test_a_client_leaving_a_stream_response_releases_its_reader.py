"""Adversarial: a client that leaves a live stream response in the middle (in-process ASGI).

The reader behind the response keeps a waiter once it reached the head; the client's
disconnect must release it (no waiter left on the stream), and a later reader still
gets every chunk once.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.streams import get_stream_manager
from tests.streams.helpers import chunk

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token_header(transactional_db):
    user = get_user_model().objects.create_user(username="dave", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


def scope(path: str, header) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [header, (b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


async def _body_until(app: ApplicationCommunicator, needle: bytes) -> bytes:
    seen = b""
    while needle not in seen:
        message = await app.receive_output(5)
        seen += message.get("body", b"")
    return seen


async def test_a_client_leaving_a_parked_stream_response_releases_the_reader_waiter(token_header):
    from tests.asgi import application

    user, header = token_header
    session, _ = await store.aget_or_create_session("chat_leave", owner_id=user.pk)
    manager = get_stream_manager()
    await manager.claim_stream(session.stream_id, "run_a", epoch=1)
    await manager.append(session.stream_id, "run_a", [chunk(1), chunk(2)])

    app = ApplicationCommunicator(application, scope(f"/helix/api/sessions/{session.id}/stream", header))
    await app.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await app.receive_output(5)
    assert start["type"] == "http.response.start" and start["status"] == 200
    await _body_until(app, b"c2 ")  # the reader reached the head and now parks on its kept waiter
    for _ in range(200):
        if manager.notifier.waiter_count(session.stream_id):
            break
        await asyncio.sleep(0.005)
    assert manager.notifier.waiter_count(session.stream_id) == 1
    await app.send_input({"type": "http.disconnect"})
    await app.wait(5)
    assert manager.notifier.waiter_count(session.stream_id) == 0

    await manager.append(session.stream_id, "run_a", [chunk(3)])
    await manager.end_stream(session.stream_id, "run_a")
    again = ApplicationCommunicator(application, scope(f"/helix/api/sessions/{session.id}/stream", header))
    await again.send_input({"type": "http.request", "body": b"", "more_body": False})
    assert (await again.receive_output(5))["status"] == 200
    body = b""
    while True:
        message = await again.receive_output(5)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    assert [body.count(f"c{n} ".encode()) for n in (1, 2, 3)] == [1, 1, 1]
    await again.wait(5)
