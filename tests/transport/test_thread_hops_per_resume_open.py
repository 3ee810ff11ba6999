"""Thread hops of opening a resume of a live run, counted to its first chunk frame (issue 23).

A resume (``GET`` of the chat route) needs the caller authenticated by the host's DRF
policy inside the host's middleware, its session and current run, the committed
messages' tool calls, then the stream. The first four are one trip to the ORM's thread
(``_admit``); the stream's backlog read, which also tells that the run holds the stream,
is the only other (none when this process's tail still holds the run's chunks). The
response's reader starts on the waiter subscribed before that read, so it reads nothing
more before it parks. Eight hops before (the ownership read, the session, run and
messages reads, the stream info and the reader's own first read were one each).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django.streams import get_stream_manager
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message
from tests.transport.test_thread_hops_per_send_and_delta import HopCounter

pytestmark = pytest.mark.django_db(transaction=True)
STREAM_READ = "DatabaseStreamManager._read_sync"


def _is_flush(name: str) -> bool:
    """A flush of the run's answer (its writer's hop, not the resume's; none on SQLite with INLINE_WRITES)."""
    return "append" in name


def _scope(method: str, path: str, key: str, extra: list[tuple[bytes, bytes]] = ()) -> dict:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Token {key}".encode()), *extra],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
        "scheme": "http",
    }


async def _token() -> str:
    def create():
        user = get_user_model().objects.create_user(username="resume-hops", password="pw-not-secret")
        return Token.objects.create(user=user).key

    return await asyncio.to_thread(create)


async def _first_frame(communicator: ApplicationCommunicator) -> bytes:
    start = await communicator.receive_output(10)
    assert start["type"] == "http.response.start" and start["status"] == 200, start
    while True:
        body = (await communicator.receive_output(10)).get("body", b"")
        if body.startswith(b"id: ") or b"\nid: " in body:
            return body


async def _resume_hops(*, tail: bool, cursor: bool) -> list[str]:
    """Start a run that stays live and quiet, open one resume of it; return the hops to its first chunk frame."""
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    path = f"/helix/api/sessions/{sid}/chat"
    with override_settings(HELIX=agent_settings(TEXT="one two three four five six", HANG_AFTER_CHUNKS=3)):
        send = ApplicationCommunicator(application, _scope("POST", path, key, [(b"content-type", b"application/json")]))
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        await send.send_input({"type": "http.request", "body": body, "more_body": False})
        first = await _first_frame(send)
        while b"text-delta" not in first:
            first = (await send.receive_output(10)).get("body", b"")
        if not tail:  # as when the tail expired (a quiet run) or another process appends
            get_stream_manager().tail.forget(sid)
        extra = [(b"x-resume-from-sequence", b"2")] if cursor else []
        resume = ApplicationCommunicator(application, _scope("GET", path, key, extra))
        with HopCounter(asyncio.get_running_loop()) as counter:
            await resume.send_input({"type": "http.request", "body": b"", "more_body": False})
            await _first_frame(resume)
            await asyncio.sleep(0.05)  # the reader is parked: it makes no read of its own
            hops = [name for name, task in counter.hops if not task.startswith("helix-run") and not _is_flush(name)]
        for communicator in (resume, send):
            await communicator.send_input({"type": "http.disconnect"})
            await communicator.wait(5)
    return hops


@pytest.mark.parametrize("cursor", [False, True], ids=["from-the-run-start", "with-a-cursor"])
async def test_a_resume_open_makes_one_hop_beside_its_stream_read(cursor):
    assert await _resume_hops(tail=False, cursor=cursor) == ["_admit", STREAM_READ]


async def test_a_resume_open_served_by_the_tail_makes_one_hop():
    assert await _resume_hops(tail=True, cursor=False) == ["_admit"]


async def test_a_raw_stream_open_with_a_cursor_makes_one_hop_beside_its_stream_read():
    """The raw stream route (``sessions/<id>/stream``): authentication and the session read are one hop,
    one read of the stream gives its info and first chunks (four hops before)."""
    from tests.asgi import application

    key = await _token()
    sid = new_session_id()
    chat = f"/helix/api/sessions/{sid}/chat"
    with override_settings(HELIX=agent_settings(TEXT="one two three four five six", HANG_AFTER_CHUNKS=3)):
        send = ApplicationCommunicator(application, _scope("POST", chat, key, [(b"content-type", b"application/json")]))
        body = json.dumps(send_body(sid, [user_message("hi")])).encode()
        await send.send_input({"type": "http.request", "body": body, "more_body": False})
        first = await _first_frame(send)
        while b"text-delta" not in first:
            first = (await send.receive_output(10)).get("body", b"")
        get_stream_manager().tail.forget(sid)
        stream = ApplicationCommunicator(
            application, _scope("GET", f"/helix/api/sessions/{sid}/stream", key, [(b"last-event-id", b"1")])
        )
        with HopCounter(asyncio.get_running_loop()) as counter:
            await stream.send_input({"type": "http.request", "body": b"", "more_body": False})
            await _first_frame(stream)
            await asyncio.sleep(0.05)
            hops = [name for name, task in counter.hops if not task.startswith("helix-run") and not _is_flush(name)]
        for communicator in (stream, send):
            await communicator.send_input({"type": "http.disconnect"})
            await communicator.wait(5)
    assert hops == ["_admit", STREAM_READ]
