"""A takeover's wake-up overtaking the reply of the old writer's last commit.

Two DatabaseStreamManager instances stand for two processes on one PostgreSQL database
and one channels_redis layer. ``web`` commits an append on the ORM's thread; before the
loop has taken that commit's reply, ``other`` claims the stream over, writes and ends it,
and its layer messages reach ``web`` first. ``web`` must not then keep the chunks of its
own commit as the stream's tail: a caught-up reader answered from it would park on an
old head with nobody left to wake it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from helix_django.streams.database import DatabaseStreamManager
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, listening, parked

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


class HeldReply:
    """Lets the manager's group commit run on the ORM's thread, then holds its reply until released."""

    def __init__(self, manager: DatabaseStreamManager) -> None:
        self.committed = threading.Event()
        self.release = threading.Event()
        original = manager._append_many_sync

        def append_many(requests):
            result = original(requests)
            self.committed.set()
            self.release.wait(TIMEOUT)
            return result

        manager._append_many_sync = append_many
        if manager.group.inline is not None:  # SQLite: every commit takes the ORM's thread, as on PostgreSQL
            manager.group.inline.close()
            manager.group.inline = None


def take_over(other: DatabaseStreamManager, sequence: int) -> None:
    """Another process claims "s1" for run_b, writes chunk ``sequence`` and ends it (on a thread and loop
    of its own: web's ORM thread is held)."""
    async_to_sync(other.claim_stream)("s1", "run_b", epoch=2)
    async_to_sync(other.append)("s1", "run_b", [chunk(sequence, "run_b")])
    async_to_sync(other.end_stream)("s1", "run_b")


async def test_a_takeover_heard_before_the_old_writers_commit_reply_still_wakes_its_reader():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        web = DatabaseStreamManager("default", {})
        other = DatabaseStreamManager("default", {})
        try:
            await web.claim_stream("s1", "run_a", epoch=1)
            await web.append("s1", "run_a", [chunk(1)])
            reader = await web.create_resumable_reader("s1", from_sequence=1)
            reader.fail_safe_seconds = 3600
            task = asyncio.ensure_future(collect(reader))
            await parked(web, "s1")
            await listening(web)

            held = HeldReply(web)
            append = asyncio.ensure_future(web.append("s1", "run_a", [chunk(2)]))
            assert await asyncio.to_thread(held.committed.wait, TIMEOUT)

            await asyncio.to_thread(take_over, other, 3)
            await asyncio.sleep(0.5)  # other's messages reached web's listener
            held.release.set()
            assert await append == [2]

            started = time.monotonic()
            got = await asyncio.wait_for(task, TIMEOUT)
            assert [s for s, _c in got] == [2, 3]
            assert time.monotonic() - started < 3

            # A resume in web after the reply: from a cursor inside what web's commit wrote.
            resumed = await web.create_resumable_reader("s1", from_sequence=1)
            resumed.fail_safe_seconds = 3600
            got = await asyncio.wait_for(collect(resumed), TIMEOUT)
            assert [s for s, _c in got] == [2, 3]
            assert resumed.last_info.status == "ended"
        finally:
            await web.notifier.remote.aclose()
            await other.notifier.remote.aclose()


async def test_a_takeover_heard_before_the_old_writers_claim_reply_keeps_its_chunks_out_of_the_tail():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        web = DatabaseStreamManager("default", {})
        other = DatabaseStreamManager("default", {})
        try:
            held_waiter = web.subscribe("s1")  # a parked reader: web's loop listens
            await listening(web)
            committed, release = threading.Event(), threading.Event()
            original = web._claim_and_append_sync

            def claim_and_append(*args):
                result = original(*args)
                committed.set()
                release.wait(TIMEOUT)
                return result

            web._claim_and_append_sync = claim_and_append
            claim = asyncio.ensure_future(web.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(1)]))
            assert await asyncio.to_thread(committed.wait, TIMEOUT)

            await asyncio.to_thread(take_over, other, 2)
            await asyncio.sleep(0.5)  # other's messages reached web's listener
            release.set()
            await claim

            reader = await web.create_resumable_reader("s1", from_sequence=0)
            reader.fail_safe_seconds = 3600
            got = await asyncio.wait_for(collect(reader), TIMEOUT)
            assert [s for s, _c in got] == [1, 2]
            assert reader.last_info.status == "ended"
            held_waiter.cancel()
        finally:
            await web.notifier.remote.aclose()
            await other.notifier.remote.aclose()
