"""A recovery's fence ends a reader with the ending the recovery decides, or a recoverable drop; never ``end paused``.

A recovery pauses the run's stream as the run (recovery/scan.py, ``fence_writer``) before
it decides the run's ending; the run is still live. The chat route's reader ends such a
response with a retryable drop (its ``[DONE]`` comes only with the run's ``suspended``
end), but the raw stream route and the WebSocket ended it with the terminal
``{"type": "end", "status": "paused"}`` of a run waiting for the browser: the client
stopped there although the run went on. Found by a review of the fourteenth session.

On every stream manager, in process through the same ASGI app daphne serves. A run that
does wait for the browser still ends its readers ``end paused``, also a reader whose
cursor is past that end.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client, override_settings

from helix_django import store
from helix_django.models import Run, RunStatus
from helix_django.recovery.scan import arecover_run, fence_writer
from helix_django.runtime.executor import get_executor
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, helix
from tests.transport import test_cursor_table as cursor_table
from tests.transport.conftest import new_session_id, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]

configured, token = cursor_table.configured, cursor_table.token  # fixtures: every stream manager, a token user
cursor, request = cursor_table.cursor, cursor_table.request
LONG = " ".join(f"x{i}" for i in range(200))
RECOVERING = {"code": "transport_stream_drop", "retryable": True, "cause": "run_recovering"}


def stream(sid: str) -> str:
    return f"/helix/api/sessions/{sid}/stream"


@pytest.fixture
def agent_options():
    """Call ``agent_options(options, **extra)``: the scripted agent for the rest of the test (same stream manager)."""
    overrides = []

    def apply(options: dict, **extra) -> None:
        override = override_settings(HELIX={**settings.HELIX, **helix(default=agent(options, **extra))})
        override.enable()
        overrides.append(override)

    yield apply
    for override in reversed(overrides):
        override.disable()


@pytest.fixture
def short_fence_wait(monkeypatch):
    """Readers wait 0.5 s for a fence's outcome: the drop tests leave the fence standing past it."""
    from helix_django.transport import frames

    monkeypatch.setattr(frames, "FENCE_WAIT_SECONDS", 0.5)


async def live_run(user):
    """A session of ``user`` with a run started; return (sid, handle)."""
    sid = new_session_id()
    session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
    return sid, await get_executor().execute(session, [user_message("go")])


async def head_reaches(sid: str, sequence: int) -> int:
    for _ in range(1000):
        head = (await get_stream_manager().get_info(sid)).head_sequence
        if head >= sequence:
            return head
        await asyncio.sleep(0.01)
    raise AssertionError(f"stream {sid} never reached {sequence}")


async def websocket(user, sid: str) -> WebsocketCommunicator:
    from tests.asgi import application

    def login_cookie():
        client = Client()
        client.force_login(user)
        return client.cookies[settings.SESSION_COOKIE_NAME].value

    cookie = f"{settings.SESSION_COOKIE_NAME}={await sync_to_async(login_cookie)()}".encode()
    ws = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[(b"cookie", cookie)])
    connected, _ = await ws.connect()
    assert connected
    return ws


async def ws_frames(ws: WebsocketCommunicator, from_sequence: int) -> list[dict]:
    await ws.send_json_to({"type": "resume", "from_sequence": from_sequence})
    frames = []
    while not frames or frames[-1]["type"] not in ("end", "fail", "error"):
        frames.append(await ws.receive_json_from(timeout=20))
    return frames


async def end_recovered(run_id: str) -> None:
    """The recovery that fenced the run decides: interrupted (its writer was fenced, it wrote no end)."""
    assert (await arecover_run(run_id, force=True, query_provider=False)).outcome == "interrupted"
    await get_executor().wait(run_id, 20)


@pytest.mark.parametrize("opened", ["before the fence", "after the fence"])
async def test_a_raw_stream_reader_of_a_fenced_run_ends_with_a_recoverable_drop(
    configured, token, agent_options, opened, short_fence_wait
):
    user, auth = token
    agent_options({"TEXT": LONG, "PACE_TPS": 40})
    sid, handle = await live_run(user)
    at = handle.from_sequence + 3
    await head_reaches(sid, at + 2)
    run = await Run.objects.aget(pk=handle.run_id)
    if opened == "after the fence":
        assert await fence_writer(run)
        status, frames = await request("GET", stream(sid), auth, cursor(at))
    else:
        reading = asyncio.ensure_future(request("GET", stream(sid), auth, cursor(at)))
        await asyncio.sleep(0.3)
        assert await fence_writer(run)
        status, frames = await reading
    assert status == 200 and frames[0]["type"] == "chunk"
    assert frames[-1]["type"] == "fail" and frames[-1]["recoverable"] is True, frames[-1]
    assert frames[-1]["errorDetail"] == RECOVERING
    assert (await Run.objects.aget(pk=handle.run_id)).is_live  # the run was never paused by itself
    await end_recovered(handle.run_id)
    status, frames = await request("GET", stream(sid), auth, cursor(frames[-2]["sequence"]))
    assert frames[-1]["type"] == "fail" and frames[-1]["recoverable"] is False
    assert frames[-1]["errorDetail"]["code"] == "run_interrupted"


async def test_a_websocket_reader_of_a_fenced_run_ends_with_a_recoverable_drop(
    configured, token, agent_options, short_fence_wait
):
    user, _auth = token
    agent_options({"TEXT": LONG, "PACE_TPS": 40})
    sid, handle = await live_run(user)
    at = handle.from_sequence + 3
    await head_reaches(sid, at + 2)
    ws = await websocket(user, sid)
    try:
        reading = asyncio.ensure_future(ws_frames(ws, at))
        await asyncio.sleep(0.3)
        assert await fence_writer(await Run.objects.aget(pk=handle.run_id))
        frames = await reading
        assert frames[0]["type"] == "chunk"
        assert frames[-1]["type"] == "fail" and frames[-1]["recoverable"] is True, frames[-1]
        assert frames[-1]["errorDetail"] == RECOVERING
        await end_recovered(handle.run_id)
        again = await ws_frames(ws, frames[-2]["sequence"])
        assert again[-1]["type"] == "fail" and again[-1]["errorDetail"]["code"] == "run_interrupted"
    finally:
        await ws.disconnect()


async def test_a_run_waiting_for_the_browser_still_ends_its_readers_paused(configured, token, agent_options):
    user, auth = token
    calls = [{"name": "pick_color", "arguments": {"prompt": "p"}}]
    agent_options({"TOOL_CALLS": calls}, tools=["tests.runtime.toolbox.pick_color"])
    sid, handle = await live_run(user)
    assert await get_executor().wait(handle.run_id, 20) == RunStatus.SUSPENDED_CLIENT_TOOL
    head = (await get_stream_manager().get_info(sid)).head_sequence
    for at in (handle.from_sequence, head):  # from the run's start, and past its suspended end
        status, frames = await request("GET", stream(sid), auth, cursor(at))
        assert (status, frames[-1]) == (200, {"type": "end", "status": "paused"})
    ws = await websocket(user, sid)
    try:
        for at in (handle.from_sequence, head):
            assert (await ws_frames(ws, at))[-1] == {"type": "end", "status": "paused"}
    finally:
        await ws.disconnect()


async def test_a_chat_route_reader_of_a_fenced_run_ends_with_the_same_drop(
    configured, token, agent_options, short_fence_wait
):
    user, auth = token
    agent_options({"TEXT": LONG, "PACE_TPS": 40})
    sid, handle = await live_run(user)
    at = handle.from_sequence + 3
    await head_reaches(sid, at + 2)
    reading = asyncio.ensure_future(request("GET", f"/helix/api/sessions/{sid}/chat", auth, cursor(at)))
    await asyncio.sleep(0.3)
    assert await fence_writer(await Run.objects.aget(pk=handle.run_id))
    status, frames = await reading
    assert status == 200 and frames[-1]["type"] == "error"
    body = json.loads(frames[-1]["errorText"])
    assert {k: body[k] for k in RECOVERING} == RECOVERING
    await end_recovered(handle.run_id)


async def fence_then_recover(run_id: str) -> None:
    """What the admin's *Mark interrupted* does to a live run: fence its writer, then decide (interrupted)."""
    await asyncio.sleep(0.3)
    assert await fence_writer(await Run.objects.aget(pk=run_id))
    await asyncio.sleep(0.1)  # the readers reach the fence first
    await end_recovered(run_id)


@pytest.mark.parametrize("wire", ["chat", "stream", "websocket"])
async def test_a_live_reader_tells_the_ending_the_recovery_decided_after_its_fence(
    configured, token, agent_options, wire
):
    """A live reader at a recovery's fence waits for its outcome: *Mark interrupted* on a live run was told to
    the reader attached live as the drop ``run_recovering``, not ``run_interrupted`` as docs/transport.md's
    ending table says and a replay said (found by a new-user check of the sixteenth session)."""
    user, auth = token
    agent_options({"TEXT": LONG, "PACE_TPS": 40})
    sid, handle = await live_run(user)
    at = handle.from_sequence + 3
    await head_reaches(sid, at + 2)
    deciding = asyncio.ensure_future(fence_then_recover(handle.run_id))
    if wire == "websocket":
        ws = await websocket(user, sid)
        try:
            frames = await ws_frames(ws, at)
        finally:
            await ws.disconnect()
    else:
        status, frames = await request("GET", f"/helix/api/sessions/{sid}/{wire}", auth, cursor(at))
        assert status == 200
    await deciding
    assert (await Run.objects.aget(pk=handle.run_id)).status == RunStatus.INTERRUPTED
    if wire == "chat":
        assert frames[-1]["type"] == "error", frames[-1]
        assert json.loads(frames[-1]["errorText"])["code"] == "run_interrupted"
    else:
        assert frames[-1]["type"] == "fail" and frames[-1]["recoverable"] is False, frames[-1]
        assert frames[-1]["errorDetail"]["code"] == "run_interrupted"
    sequences = [f["sequence"] for f in frames if isinstance(f, dict) and f.get("type") == "chunk"]
    assert sequences == sorted(set(sequences))  # the followed stream repeats nothing


async def test_a_fence_still_standing_after_the_wait_is_the_drop(configured, token, agent_options, short_fence_wait):
    """The drop tests above leave their fence standing past the wait: opened after it, the same drop."""
    user, auth = token
    agent_options({"TEXT": LONG, "PACE_TPS": 40})
    sid, handle = await live_run(user)
    at = handle.from_sequence + 3
    await head_reaches(sid, at + 2)
    assert await fence_writer(await Run.objects.aget(pk=handle.run_id))
    # opened after the fence: the chat route refuses at once (503, Retry-After), the raw stream route waits
    status, body = await request("GET", f"/helix/api/sessions/{sid}/chat", auth, cursor(at))
    assert status == 503 and {k: body[k] for k in RECOVERING} == RECOVERING, (status, body)
    status, frames = await request("GET", stream(sid), auth, cursor(at))
    assert status == 200 and frames[-1]["errorDetail"] == RECOVERING, frames[-1]
    await end_recovered(handle.run_id)
