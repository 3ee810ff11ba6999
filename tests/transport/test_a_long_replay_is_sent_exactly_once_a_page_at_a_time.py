"""A chat-route replay longer than a plan holds is sent exactly once, in order, on every stream manager.

A plan keeps at most ``plan_reads.HELD_CHUNKS`` chunks and reads the rest again while it
sends them (``test_a_reader_that_never_reads_holds_bounded_server_memory.py`` for why).
Here the sizes are shrunk so that short runs cross every boundary (the kept part, whole
pages, a last partial page), through the chat route's ASGI app, for a finished run resumed
from a cursor and for a live run resumed from its start and followed to its end.
"""

from __future__ import annotations

import asyncio

import pytest
from django.test import override_settings

from helix_django import store
from helix_django.models import Run
from helix_django.runtime.executor import get_executor
from helix_django.streams import get_stream_manager, reset_stream_managers
from helix_django.transport import plan_reads
from tests.runtime.conftest import agent, helix
from tests.streams.conftest import BACKENDS, redis_options
from tests.transport.conftest import user_message
from tests.transport.test_cursor_table import chat, cursor, finished_turns, request, text_of

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

WORDS = " ".join(f"w{i}" for i in range(60))


@pytest.fixture(params=sorted(BACKENDS))
def configured(request, monkeypatch):
    """HELIX with one stored chunk per word, on each stream manager; plans hold 7 chunks, read pages of 5."""
    monkeypatch.setattr(plan_reads, "HELD_CHUNKS", 7)
    monkeypatch.setattr(plan_reads, "PAGE_CHUNKS", 5)
    backend = dict(BACKENDS[request.param])
    if request.param == "redis":
        backend["OPTIONS"] = redis_options()
    settings = {
        **helix(default=agent({"TEXT": WORDS, "PACE_TPS": 300})),
        "COALESCE_DELTAS": False,
        "STREAM_MANAGERS": {"default": backend},
    }
    with override_settings(HELIX=settings):
        reset_stream_managers()
        yield request.param
    reset_stream_managers()


@pytest.fixture
def token(transactional_db):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username="replay-user", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def test_a_finished_run_resumed_from_any_cursor_gets_the_rest_once(configured, token):
    user, auth = token
    sid, run = await finished_turns(user)
    full = (await request("GET", chat(sid), auth, cursor(run.start_sequence)))[1]
    assert text_of(full) == WORDS and full[-1] == "[DONE]"
    deltas = [frame for frame in full if isinstance(frame, dict) and frame.get("type") == "text-delta"]
    head = (await get_stream_manager().get_info(sid)).head_sequence
    for skip in (0, 1, 6, 7, 8, 12, 13, 31, 59):  # inside the kept part, at its edge, in later pages
        first = await _sequence_of_delta(sid, run, skip)
        status, frames = await request("GET", chat(sid), auth, cursor(first - 1))
        assert status == 200 and frames[-1] == "[DONE]", (skip, frames[-3:])
        assert text_of(frames) == "".join(d["delta"] for d in deltas[skip:]), skip
    assert (await request("GET", chat(sid), auth, cursor(head)))[0] == 204


async def _sequence_of_delta(sid: str, run: Run, index: int) -> int:
    """The stream sequence of the run's ``index``-th text delta."""
    chunks = await get_stream_manager().read_all(sid, after=run.start_sequence)
    deltas = [seq for seq, chunk in chunks if chunk.get("type") == "text-delta"]
    return deltas[index]


async def test_a_live_run_resumed_from_its_start_is_followed_to_its_end_once(configured, token):
    user, auth = token
    sid, _run = await finished_turns(user)  # the session exists, with one turn done
    session, _ = await store.aget_or_create_session(sid, owner_id=user.pk)
    history = [m async for m in session.messages.order_by("position")]
    handle = await get_executor().execute(session, [*(m.to_ui_message() for m in history), user_message("again")])
    manager = get_stream_manager()
    run = await Run.objects.aget(pk=handle.run_id)
    for _ in range(400):  # a backlog of several pages before the resume opens
        chunks = await manager.read_all(sid, after=run.start_sequence)
        if sum(chunk.get("type") == "text-delta" for _seq, chunk in chunks) >= 23:
            break
        await asyncio.sleep(0.005)
    status, frames = await request("GET", chat(sid), auth)  # no cursor: the live run from its start
    assert status == 200 and frames[-1] == "[DONE]"
    assert text_of(frames) == WORDS
    assert sum(isinstance(frame, dict) and frame.get("type") == "start" for frame in frames) == 1
    assert await get_executor().wait(handle.run_id, 20) == "completed"
