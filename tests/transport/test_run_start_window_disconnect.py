"""A client that goes away while its resume waits in the run-start window (002, "The run-start window").

The run-start commit has landed, the stream is not claimed yet; a resume parks in
``wait_until_live``. When its client disconnects, the server answers nothing, raises
nothing, and keeps no waiter or task for it; the run goes live and finishes untouched,
and a later resume from the same cursor gets the whole answer exactly once.

The run is started, claimed and written by *this* test process, like a worker process.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.models import Run, RunStatus
from helix_django.streams import get_stream_manager, reset_stream_managers
from helix_django.streams.broadcast import GROUP
from tests.conftest import redis_url
from tests.scale.settings import redis_channel_layer
from tests.transport.conftest import (
    PREFIX,
    chat_url,
    layer_server,
    new_session_id,
    read_sse,
    run_in_start_window,
    user_message,
    worker_chunks,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = ["Parked ", "readers ", "never ", "hold ", "the ", "run."]


async def run_like_a_worker(started: store.RunStartResult) -> None:
    """Claim the stream, write the answer, end the stream and commit the run ``completed``."""
    run = started.run
    manager = get_stream_manager()
    await manager.claim_stream(run.session_id, run.id, epoch=started.checkpoint.id)
    chunks = worker_chunks(run, ANSWER)
    await manager.append(run.session_id, run.id, chunks[:6])
    await asyncio.sleep(0.1)
    sequences = await manager.append(run.session_id, run.id, chunks[6:])
    message = {
        "id": run.response_message_id,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": "".join(ANSWER), "state": "done"}],
        "metadata": {},
    }
    await store.acommit_terminal(run.id, RunStatus.COMPLETED, response_message=message, stream_sequence=sequences[-1])
    await manager.end_stream(run.session_id, run.id)


def answer_text(chunks: list[dict]) -> str:
    return "".join(c["delta"] for c in chunks if c.get("type") == "text-delta")


# --- in process: the waiter and the task are visible -------------------------------------


def resume_scope_headers(token: str, cursor: int) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Token {token}".encode()), (b"x-resume-from-sequence", str(cursor).encode())]


def sse_chunks(body: bytes) -> list[dict]:
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


async def test_a_disconnect_in_the_run_start_window_leaves_no_waiter_and_no_task():
    """Through Channels' communicator (the same ASGI app daphne serves), to count waiters and tasks."""
    user = await get_user_model().objects.acreate_user(username="parked", password="pw-not-secret")
    token = (await Token.objects.acreate(user=user)).key
    sid = new_session_id()
    await store.aget_or_create_session(sid, owner_id=user.pk)
    started = await store.astart_run(store.RunStartRequest(session_id=sid, input_messages=[user_message("hi")]))
    cursor = started.run.start_sequence  # the snapshot's cursor in the run-start window
    notifier = get_stream_manager().notifier

    from tests.asgi import application

    before = asyncio.all_tasks()
    path = f"{PREFIX}/sessions/{sid}/chat"
    parked = HttpCommunicator(application, "GET", path, headers=resume_scope_headers(token, cursor))
    await parked.send_input({"type": "http.request", "body": b"", "more_body": False})
    for _ in range(500):
        if notifier.waiter_count(sid) == 1:
            break
        await asyncio.sleep(0.01)
    assert notifier.waiter_count(sid) == 1, "the resume did not park in the run-start window"

    await parked.send_input({"type": "http.disconnect"})
    await parked.wait(timeout=5)  # the app returns (an exception in it would be raised here)
    assert await parked.receive_nothing(timeout=0.2)  # no response for a client that left
    assert notifier.waiter_count(sid) == 0
    await asyncio.sleep(0)
    left = {t for t in asyncio.all_tasks() - before if not t.done()}
    assert not left, f"tasks left behind: {left}"

    await run_like_a_worker(started)  # the run goes live and finishes with nobody reading
    run = await Run.objects.aget(pk=started.run.id)
    assert run.status == RunStatus.COMPLETED

    later = HttpCommunicator(application, "GET", path, headers=resume_scope_headers(token, cursor))
    response = await later.get_response(timeout=10)
    assert response["status"] == 200
    chunks = sse_chunks(response["body"])
    assert chunks[0] == {"type": "start", "messageId": run.response_message_id}
    assert answer_text(chunks) == "".join(ANSWER)  # every word once
    assert [c["type"] for c in chunks].count("finish") == 1
    assert response["body"].endswith(b"data: [DONE]\n\n")


async def test_one_resume_leaving_the_run_start_window_keeps_the_others_subscription():
    """Two resumes park on one stream in one process; the first one's client leaves.

    With a cross-process layer (channels_redis) the process's channel stays in the layer
    group while its readers come and go: the leaving resume must not take the remaining
    one's wake-ups with it, so the claim (made as another process would) still wakes it.
    """
    user = await get_user_model().objects.acreate_user(username="parked2", password="pw-not-secret")
    token = (await Token.objects.acreate(user=user)).key
    sid = new_session_id()
    await store.aget_or_create_session(sid, owner_id=user.pk)
    started = await store.astart_run(store.RunStartRequest(session_id=sid, input_messages=[user_message("hi")]))
    cursor = started.run.start_sequence

    from tests.asgi import application

    path = f"{PREFIX}/sessions/{sid}/chat"
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-t-{uuid.uuid4().hex[:8]}")):
        reset_stream_managers()
        manager = get_stream_manager()
        remote = manager.notifier.remote
        assert remote is not None  # the channels_redis broadcaster
        try:
            leaving = HttpCommunicator(application, "GET", path, headers=resume_scope_headers(token, cursor))
            staying = HttpCommunicator(application, "GET", path, headers=resume_scope_headers(token, cursor))
            await leaving.send_input({"type": "http.request", "body": b"", "more_body": False})
            answer = asyncio.ensure_future(staying.get_response(timeout=15))
            for _ in range(500):
                if manager.notifier.waiter_count(sid) == 2:
                    break
                await asyncio.sleep(0.01)
            assert manager.notifier.waiter_count(sid) == 2, "the resumes did not park"
            listener = remote._listeners[asyncio.get_running_loop()]

            await leaving.send_input({"type": "http.disconnect"})
            await leaving.wait(timeout=5)

            # The group join wakes local waiters once it completes (a re-read covers anything
            # published before it); under load that wake can land here, and the staying
            # resume then parks again. Either way exactly one is left.
            for _ in range(500):
                if manager.notifier.waiter_count(sid) == 1 and listener.hearing:
                    break
                await asyncio.sleep(0.01)
            assert manager.notifier.waiter_count(sid) == 1
            await asyncio.sleep(0.6)
            # The process stays in the group: a claim made by another process reaches it.
            members = await redis_client().zrange(remote.layer._group_key(GROUP), 0, -1)
            assert listener.channel.encode() in members

            await run_like_a_worker(started)
            response = await answer
            assert response["status"] == 200
            assert answer_text(sse_chunks(response["body"])) == "".join(ANSWER)
        finally:
            await remote.aclose()
            reset_stream_managers()


# --- over daphne --------------------------------------------------------------------------


def redis_client():
    import redis.asyncio

    return redis.asyncio.Redis.from_url(redis_url())


@pytest.mark.redis
def test_a_client_gone_during_the_run_start_window_costs_the_run_nothing(daphne_server_factory, users):
    """daphne + channels_redis (this process claims, the server learns it through the layer)."""
    server, prefix = layer_server(daphne_server_factory)
    user, headers = users["a"]
    sid, started = run_in_start_window(user.pk)
    run = started.run
    with httpx.Client(headers=headers, timeout=10) as client:
        snapshot = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
    assert snapshot["status"] == "active"  # the run-start window: live, the stream not claimed
    cursor = str(snapshot["streamSequence"])

    # The client gives up while the server waits for the run to go live, and closes the connection.
    with httpx.Client(headers=headers, timeout=httpx.Timeout(10, read=1.0)) as impatient:
        began = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            impatient.get(chat_url(server, sid), headers={"X-Resume-From-Sequence": cursor})
        assert time.monotonic() - began >= 1.0  # nothing was answered while it waited
    time.sleep(0.5)  # the server sees the disconnect

    with override_settings(CHANNEL_LAYERS=redis_channel_layer(prefix)):
        reset_stream_managers()
        try:
            async_to_sync(run_like_a_worker)(started)
        finally:
            reset_stream_managers()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED

    with httpx.Client(headers=headers, timeout=10) as client:
        later = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": cursor})
    assert later.status == 200 and later.done
    assert later.chunks[0] == {"type": "start", "messageId": run.response_message_id}
    assert later.text == "".join(ANSWER)  # the whole answer, each word once
    assert [c["type"] for c in later.chunks].count("finish") == 1
    log = server.log_text()
    for marker in ("Traceback", "Exception", "ERROR", "took too long to shut down", "was never awaited"):
        assert marker not in log, log[-3000:]
