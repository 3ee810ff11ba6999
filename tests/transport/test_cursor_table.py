"""The cursor table (docs/transport.md, "Cursors"): every resume gets an answer a client can act on.

Each row runs on every stream manager (memory, database, redis), in process through the
chat route's and the raw stream route's ASGI apps (Channels' HttpCommunicator: the same
app daphne serves), with runs executed by the real executor on the scripted provider.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django import store
from helix_django.models import Run
from helix_django.runtime.executor import get_executor
from helix_django.streams import get_stream_manager, reset_stream_managers
from tests.conftest import redis_url
from tests.runtime.conftest import agent, helix
from tests.streams.conftest import BACKENDS, redis_options
from tests.transport.conftest import new_session_id, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

WORDS = " ".join(f"w{i}" for i in range(12))


@pytest.fixture(params=sorted(BACKENDS))
def configured(request):
    """HELIX with the scripted agent and the stream manager of each backend."""
    backend = dict(BACKENDS[request.param])
    if request.param == "redis":
        backend["OPTIONS"] = redis_options()
    settings = {**helix(default=agent({"TEXT": WORDS, "PACE_TPS": 400})), "STREAM_MANAGERS": {"default": backend}}
    with override_settings(HELIX=settings):
        reset_stream_managers()
        yield request.param
    reset_stream_managers()


@pytest.fixture
def plain_redis():
    import redis

    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def token(transactional_db):
    user = get_user_model().objects.create_user(username="cursor-user", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def request(method, path, auth, headers=(), body=b""):
    """Return (status, parsed body): the SSE frames' data as a list, or the JSON body, or None."""
    from tests.asgi import application

    communicator = HttpCommunicator(application, method, path, body=body, headers=[auth, *headers])
    response = await communicator.get_response(timeout=20)
    raw = response["body"].decode()
    if dict(response["headers"]).get(b"content-type", b"").startswith(b"text/event-stream"):
        data = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
        return response["status"], [d if d == "[DONE]" else json.loads(d) for d in data]
    return response["status"], (json.loads(raw) if raw else None)


def text_of(frames):
    return "".join(f.get("delta", "") for f in frames if isinstance(f, dict) and f.get("type") == "text-delta")


async def finished_turns(user, count=1):
    """A session with ``count`` completed turns; return (session id, the last run)."""
    sid = new_session_id()
    session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
    executor = get_executor()
    for i in range(count):
        history = await sync_to_async(lambda: [m.to_ui_message() for m in session.messages.order_by("position")])()
        handle = await executor.execute(session, [*history, user_message(f"q{i}")])
        assert await executor.wait(handle.run_id, 20) == "completed"
    return sid, await Run.objects.aget(pk=handle.run_id)


def chat(sid):
    return f"/helix/api/sessions/{sid}/chat"


def cursor(value, name=b"x-resume-from-sequence"):
    return [(name, str(value).encode())]


async def test_rows_of_a_finished_run(configured, token):
    user, auth = token
    sid, run = await finished_turns(user)
    head = (await get_stream_manager().get_info(sid)).head_sequence
    # No cursor, or the client holds the end: nothing to resume.
    assert (await request("GET", chat(sid), auth))[0] == 204
    assert (await request("GET", chat(sid), auth, cursor(head)))[0] == 204
    # Inside the run: the rest, then [DONE].
    status, frames = await request("GET", chat(sid), auth, cursor(run.start_sequence + 3))
    assert status == 200 and frames[-1] == "[DONE]" and WORDS.endswith(text_of(frames)) and text_of(frames)
    # Below the run's start (a stale cursor of an earlier turn): clamped, the run is replayed whole.
    status, frames = await request("GET", chat(sid), auth, cursor(max(run.start_sequence - 1, 0)))
    assert status == 200 and text_of(frames) == WORDS and frames[-1] == "[DONE]"
    # Beyond the head: the client holds sequences the stream never had.
    status, body = await request("GET", chat(sid), auth, cursor(head + 5))
    assert status == 409 and body["code"] == "state_not_resumable" and body["cause"] == "cursor_ahead"
    assert body["headSequence"] == head


async def test_a_stale_cursor_of_a_superseded_turn_replays_the_current_run(configured, token):
    user, auth = token
    sid, run = await finished_turns(user, count=2)
    first = await Run.objects.filter(session_id=sid).order_by("created_at").afirst()
    status, frames = await request("GET", chat(sid), auth, cursor(first.start_sequence + 2))
    assert status == 200 and text_of(frames) == WORDS
    assert frames[0]["type"] == "start" and frames[0]["messageId"] == run.response_message_id


async def test_a_purged_or_expired_stream_is_refused_typed_never_204(configured, token, plain_redis):
    user, auth = token
    sid, run = await finished_turns(user)
    manager = get_stream_manager()
    if configured == "redis":  # the TTL expired: every key of the stream is gone
        for key in plain_redis.scan_iter(f"{manager.options['KEY_PREFIX']}*"):
            plain_redis.delete(key)
        assert await manager.get_info(sid) is None
    else:
        await manager.purge_stream(sid)
    status, body = await request("GET", chat(sid), auth, cursor(run.start_sequence + 2))
    assert status == 409 and body["code"] == "state_not_resumable" and body["cause"] == "stream_expired"
    assert (await request("GET", chat(sid), auth))[0] == 204  # no cursor: the snapshot is the answer
    snapshot = await request("GET", f"/helix/api/sessions/{sid}/snapshot", auth)
    assert snapshot[0] == 200


LONG = " ".join(f"x{i}" for i in range(40))


async def test_rows_of_a_live_run(configured, token):
    from django.conf import settings

    user, auth = token
    with override_settings(HELIX={**settings.HELIX, **helix(default=agent({"TEXT": LONG, "PACE_TPS": 25}))}):
        sid = new_session_id()
        session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
        handle = await get_executor().execute(session, [user_message("live")])
        manager = get_stream_manager()
        for _ in range(500):
            head = (await manager.get_info(sid)).head_sequence
            if head >= handle.from_sequence + 6:
                break
            await asyncio.sleep(0.01)
        status, body = await request("GET", chat(sid), auth, cursor(head + 1000))
        assert status == 409 and body["cause"] == "cursor_ahead"
        (inside_status, inside), (whole_status, whole) = await asyncio.gather(
            request("GET", chat(sid), auth, cursor(handle.from_sequence + 4)), request("GET", chat(sid), auth)
        )
        assert await get_executor().wait(handle.run_id, 20) == "completed"
    assert inside_status == 200 and inside[-1] == "[DONE]" and LONG.endswith(text_of(inside)) and text_of(inside)
    assert whole_status == 200 and whole[-1] == "[DONE]" and text_of(whole) == LONG


@pytest.mark.parametrize("route", ["chat", "stream"])
async def test_cursor_headers_follow_one_rule_on_every_route(configured, token, route):
    user, auth = token
    sid, run = await finished_turns(user)
    path = f"/helix/api/sessions/{sid}/{route}"
    inside = run.start_sequence + 8  # after a few text deltas
    both = [(b"x-resume-from-sequence", str(inside).encode()), (b"last-event-id", str(inside + 1).encode())]
    status, body = await request("GET", path, auth, both)
    assert status == 400 and body["code"] == "validation_error" and body["cause"] == "cursor_conflict"
    agree = [(b"x-resume-from-sequence", str(inside).encode()), (b"last-event-id", str(inside).encode())]
    assert (await request("GET", path, auth, agree))[0] == 200
    status, body = await request("GET", path, auth, cursor("12abc", b"last-event-id"))
    assert status == 400 and body["cause"] == "cursor"
    # The query parameter is a fallback only: a header wins over it (an EventSource's reconnect).
    status, frames = await request("GET", f"{path}?resumeFromSequence=0", auth, cursor(inside, b"last-event-id"))
    assert status == 200
    ids_text = text_of(frames) if route == "chat" else text_of([f["chunk"] for f in frames if f["type"] == "chunk"])
    assert WORDS.endswith(ids_text) and ids_text != WORDS
    head = (await get_stream_manager().get_info(sid)).head_sequence
    status, body = await request("GET", path, auth, cursor(head + 1))
    assert status == 409 and body["cause"] == "cursor_ahead"


async def test_the_websocket_refuses_a_cursor_beyond_the_head_typed(configured, token):
    from channels.testing import WebsocketCommunicator
    from django.conf import settings as django_settings
    from django.test import Client

    from tests.asgi import application

    user, _auth = token
    sid, _run = await finished_turns(user)
    head = (await get_stream_manager().get_info(sid)).head_sequence

    def login_cookie():
        client = Client()
        client.force_login(user)
        return client.cookies[django_settings.SESSION_COOKIE_NAME].value

    cookie = f"{django_settings.SESSION_COOKIE_NAME}={await sync_to_async(login_cookie)()}".encode()
    ws = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[(b"cookie", cookie)])
    connected, _ = await ws.connect()
    assert connected
    await ws.send_json_to({"type": "resume", "from_sequence": head + 3})
    frame = await ws.receive_json_from(timeout=10)
    assert frame["type"] == "error" and frame["code"] == "state_not_resumable" and frame["cause"] == "cursor_ahead"
    await ws.send_json_to({"type": "resume", "from_sequence": head})
    assert (await ws.receive_json_from(timeout=10)) == {"type": "end", "status": "completed"}
    await ws.disconnect()


async def test_a_resume_while_a_recovery_fences_the_run_is_a_retryable_503(configured, token):
    """A live run whose stream a recovery paused (fence_writer) is being decided: come back, never a 204."""
    from django.conf import settings

    from helix_django.recovery.scan import arecover_run, fence_writer

    user, auth = token
    with override_settings(HELIX={**settings.HELIX, **helix(default=agent({"TEXT": LONG, "PACE_TPS": 25}))}):
        sid = new_session_id()
        session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
        handle = await get_executor().execute(session, [user_message("fenced")])
        run = await Run.objects.aget(pk=handle.run_id)
        assert await fence_writer(run)
        status, body = await request("GET", chat(sid), auth, cursor(handle.from_sequence + 2))
        assert status == 503 and body["code"] == "transport_stream_drop" and body["cause"] == "run_recovering"
        assert (await arecover_run(run.id, force=True, query_provider=False)).outcome == "interrupted"
        status, body = await request("GET", chat(sid), auth, cursor(handle.from_sequence + 2))
        assert status == 409 and body["error"] == "stream_failed" and body["code"] == "run_interrupted"
        await get_executor().wait(handle.run_id, 10)


async def test_a_resume_between_a_runs_terminal_commit_and_its_stream_end_tells_the_ending(
    configured, token, monkeypatch
):
    """A Stop served by another process commits ``cancelled`` before it closes the stream (recovery/outcomes.py).

    A resume in between, its cursor at the head, was a 204 (the client holds everything) and
    never told ``abort`` + ``[DONE]`` (seen under load in the two-process Stop test, session 15).
    It now waits for the stream's end.
    """
    from django.conf import settings

    from helix_django.recovery import outcomes
    from helix_django.runtime.executor import LocalExecutor

    user, auth = token
    entered, released = asyncio.Event(), asyncio.Event()
    close = outcomes.aclose_stream

    async def held_close(*args, **kwargs):
        entered.set()
        await released.wait()
        await close(*args, **kwargs)

    monkeypatch.setattr(outcomes, "aclose_stream", held_close)
    with override_settings(HELIX={**settings.HELIX, **helix(default=agent({"TEXT": LONG, "PACE_TPS": 25}))}):
        sid = new_session_id()
        session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
        handle = await get_executor().execute(session, [user_message("stop me elsewhere")])
        run = await Run.objects.aget(pk=handle.run_id)
        other = LocalExecutor()  # another process: no entry for the run, it cancels detached
        try:
            stopping = asyncio.ensure_future(other.cancel(session=session, run_id=run.id))
            await asyncio.wait_for(entered.wait(), 20)
            assert (await Run.objects.aget(pk=run.id)).status == "cancelled"
            head = (await get_stream_manager().get_info(session.stream_id)).head_sequence
            resuming = asyncio.ensure_future(request("GET", chat(sid), auth, cursor(head)))
            await asyncio.sleep(0.3)
            released.set()
            status, frames = await asyncio.wait_for(resuming, 20)
            assert status == 200, frames
            assert frames[-2:] == [{"type": "abort"}, "[DONE]"]
            await asyncio.wait_for(stopping, 20)
        finally:
            released.set()
            other.close()
        await get_executor().wait(handle.run_id, 10)
