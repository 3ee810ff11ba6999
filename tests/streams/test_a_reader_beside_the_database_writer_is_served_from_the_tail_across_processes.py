"""With a channel layer that spans processes, readers beside the database writer still follow it from the tail.

Two DatabaseStreamManager instances stand for two processes sharing the database and a
channels_redis layer (docs/production.md's several-process shape). Readers in the writing
process are answered from its tail cache, a caught-up reader included: no database read
per chunk. What makes that sound is that another process's write of the stream drops the
tail entry before its message wakes the readers
(tests/adversarial/test_an_old_tail_sees_the_other_processs_writes.py proves that side,
and tests/scale/test_tasks_executor.py that a process outside the group still reads the
database).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.test import override_settings

from helix_django.streams.database import DatabaseStreamManager
from tests.adversarial.test_an_old_tail_sees_the_other_processs_writes import joined
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, live_followers, parked

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


def count_database_reads(manager: DatabaseStreamManager) -> list[int]:
    """Record the cursor of every read that reaches the database; returns the live list."""
    reads: list[int] = []
    original = manager._read_sync

    def recording(stream_id, after, limit):
        reads.append(after)
        return original(stream_id, after, limit)

    manager._read_sync = recording
    return reads


async def test_readers_beside_the_writer_follow_it_without_reading_the_database():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        web = DatabaseStreamManager("default", {})
        other = DatabaseStreamManager("default", {})  # another process, listening on the same layer
        assert web.notifier.remote is not None
        try:
            await web.claim_stream("s1", "run_a", epoch=1)
            readers, got, tasks = await live_followers(web, 3)
            await joined(web)
            await asyncio.sleep(0.1)  # the join's own re-read
            reads = count_database_reads(web)

            for n in range(1, 21):
                await web.append("s1", "run_a", [chunk(n)])
                for into in got:
                    for _ in range(10_000):
                        if len(into) == n:
                            break
                        await asyncio.sleep(0)
                await parked(web, "s1")
            await asyncio.sleep(0.2)  # let any echo of this process's own messages arrive
            assert got == [list(range(1, 21))] * 3
            assert reads == []

            await web.end_stream("s1", "run_a")
            await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
            assert got == [list(range(1, 21))] * 3
        finally:
            await web.notifier.remote.aclose()
            await other.notifier.remote.aclose()
