"""A session whose run is live but whose stream does not exist yet is a retryable drop, not ``stream_not_found``.

The stream claim follows the run-start commit on the process that runs the run. A raw
stream reader or a WebSocket on another process, arriving in between (it saw the run row),
was told 404 ``stream_not_found`` (not retryable), and a client following the rules gave up
on a run that went on; seen under load in the two-process Redis test
(tests/scale/test_a_stop_on_another_process_keeps_the_text_the_user_saw.py). Now it is 503
``transport_stream_drop`` (``cause: "stream_opening"``): the client comes back from its
cursor. A session with no live run and no stream stays 404 ``stream_not_found``.

On every stream manager, in process through the same ASGI app daphne serves.
"""

from __future__ import annotations

import pytest

from helix_django import store
from helix_django.models import Run, RunStatus
from tests.transport import test_cursor_table as cursor_table
from tests.transport.conftest import new_session_id
from tests.transport.test_a_recovery_fence_is_a_drop_on_the_raw_stream_and_websocket import stream, websocket

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

configured, token = cursor_table.configured, cursor_table.token  # fixtures: every stream manager, a token user
request, cursor = cursor_table.request, cursor_table.cursor
OPENING = {"code": "transport_stream_drop", "retryable": True, "cause": "stream_opening"}


async def session_of(user, *, run_status: str | None) -> str:
    """A session of ``user`` with no stream; with a run in ``run_status`` (committed, its claim not landed)."""
    sid = new_session_id()
    session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
    if run_status is not None:
        await Run.objects.acreate(id=f"run_{sid[2:18]}", session_id=session.pk, status=run_status)
    return sid


async def test_the_raw_stream_route_tells_a_stream_in_opening_to_come_back(configured, token):
    user, auth = token
    sid = await session_of(user, run_status=RunStatus.STARTING)
    status, body = await request("GET", stream(sid), auth, cursor(0))
    assert status == 503 and {key: body[key] for key in OPENING} == OPENING, body
    status, body = await request("GET", stream(await session_of(user, run_status=None)), auth, cursor(0))
    assert (status, body["code"]) == (404, "stream_not_found")
    status, body = await request("GET", stream(await session_of(user, run_status=RunStatus.COMPLETED)), auth)
    # an ended run's stream gone (expired or purged): nothing to wait for, told as the chat route tells it
    assert (status, body["code"], body["cause"]) == (409, "state_not_resumable", "stream_expired")


async def test_the_websocket_tells_a_stream_in_opening_to_come_back(configured, token):
    user, _auth = token
    sid = await session_of(user, run_status=RunStatus.STARTING)
    ws = await websocket(user, sid)
    try:
        await ws.send_json_to({"type": "resume", "from_sequence": 0})
        frame = await ws.receive_json_from(timeout=20)
        assert frame["type"] == "error" and {key: frame[key] for key in OPENING} == OPENING, frame
    finally:
        await ws.disconnect()
