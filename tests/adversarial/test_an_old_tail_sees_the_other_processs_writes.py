"""Adversarial: the database manager's tail cache and the reader's kept waiter across processes.

Two DatabaseStreamManager instances stand for two processes: each has its own tail cache
and notifier, and they share the database and a channels_redis layer. A process's tail
holds the chunks it appended with the info committed then; once another process took the
stream over, that info is old. A reader served from it must still see what the other
process wrote, and end with the stream, without waiting for the fail-safe timeout.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.test import override_settings

from helix_django.streams.database import DatabaseStreamManager
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, parked

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


async def joined(manager: DatabaseStreamManager) -> None:
    """Wait until the manager's layer listener confirmed its joins (AssertionError after 2 s)."""
    remote = manager.notifier.remote
    for _ in range(200):
        listeners = list(remote._listeners.values())
        if listeners and all(listener.ready.is_set() for listener in listeners) and not remote._tasks:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the layer listener never joined")


async def test_a_reader_served_from_an_old_tail_sees_the_other_process_and_ends():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        web = DatabaseStreamManager("default", {})
        other = DatabaseStreamManager("default", {})
        try:
            await web.claim_stream("s1", "run_a", epoch=1)
            await web.append("s1", "run_a", [chunk(n) for n in range(1, 6)])
            # Readers of this process parked on the stream: the process stays in its group
            # (``held`` stands for a reader of the next turn, parked all along).
            held = web.subscribe("s1")
            first = await web.create_resumable_reader("s1", from_sequence=5)
            first.fail_safe_seconds = 3600
            first_task = asyncio.ensure_future(collect(first))
            await parked(web, "s1")
            await joined(web)

            # Another process takes the stream over, writes and ends it.
            await other.claim_stream("s1", "run_b", epoch=2)
            await other.append("s1", "run_b", [chunk(n, "run_b") for n in range(6, 9)])
            await other.end_stream("s1", "run_b")
            assert [s for s, _c in await asyncio.wait_for(first_task, 5)] == [6, 7, 8]

            # A resume in this process, from a cursor inside its tail.
            second = await web.create_resumable_reader("s1", from_sequence=2)
            second.fail_safe_seconds = 3600
            got = await asyncio.wait_for(collect(second), 5)
            assert [s for s, _c in got] == [3, 4, 5, 6, 7, 8]
            assert second.last_info.status == "ended"
            held.cancel()
        finally:
            await web.notifier.remote.aclose()
            await other.notifier.remote.aclose()
