"""Readers of a Redis stream in other processes keep working beside the writer's process tail.

Two RedisStreamManager instances stand for two processes: each has its own tail,
notifier, pub/sub listener and origin token, and they share redis-server. The writing
process serves its own readers from its tail; the other process's readers wake on the
pub/sub notice and read Redis. Every reader sees every chunk once, in order. When another
process takes the stream over, the writing process's tail is dropped on its notice, so
its readers see the other process's chunks and the end without waiting for the
fail-safe timer, even when that notice overtakes the reply of its own last append.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.streams.conftest import another_redis_process, redis_manager
from tests.streams.helpers import chunk, collect, parked

pytestmark = [pytest.mark.redis]

TIMEOUT = 10


async def reader_of(manager, stream_id: str = "s1", from_sequence: int = 0):
    reader = await manager.create_resumable_reader(stream_id, from_sequence=from_sequence)
    reader.fail_safe_seconds = 3600  # a reader that misses a wake-up fails the test's timeout
    return reader


async def test_readers_on_both_processes_see_every_chunk_once_in_order():
    writer = redis_manager()
    other = another_redis_process(writer)
    rng = random.Random(7)
    try:
        await writer.claim_stream("s1", "run_a", epoch=1)
        readers = [await reader_of(writer), await reader_of(writer), await reader_of(other), await reader_of(other)]
        tasks = [asyncio.ensure_future(collect(reader)) for reader in readers]
        await parked(writer, "s1")
        await parked(other, "s1")
        expected, n = [], 0
        for _ in range(60):
            batch = [chunk(n + i) for i in range(1, rng.choice([1, 1, 2, 5]) + 1)]
            n += len(batch)
            expected += list(zip(await writer.append("s1", "run_a", batch), batch, strict=True))
            if rng.random() < 0.5:
                await asyncio.sleep(rng.choice([0, 0.001, 0.005]))
        # A resume on each process from a cursor inside the writer's tail, while the run goes on.
        late = [await reader_of(writer, from_sequence=n - 3), await reader_of(other, from_sequence=n - 3)]
        tasks += [asyncio.ensure_future(collect(reader)) for reader in late]
        more = [chunk(n + 1), chunk(n + 2)]
        expected += list(zip(await writer.append("s1", "run_a", more), more, strict=True))
        await writer.end_stream("s1", "run_a")
        results = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        for got in results[:4]:
            assert got == expected
        for got in results[4:]:
            assert got == expected[n - 3 :]
        assert [reader.last_info.status for reader in readers + late] == ["ended"] * 6
    finally:
        await writer.aclose()
        await other.aclose()


async def test_a_takeover_by_another_process_reaches_readers_served_from_the_old_tail():
    web = redis_manager()
    other = another_redis_process(web)
    try:
        await web.claim_stream("s1", "run_a", epoch=1)
        await web.append("s1", "run_a", [chunk(n) for n in range(1, 6)])
        first = await reader_of(web, from_sequence=5)
        first_task = asyncio.ensure_future(collect(first))
        await parked(web, "s1")

        await other.claim_stream("s1", "run_b", epoch=2)
        await other.append("s1", "run_b", [chunk(n, "run_b") for n in range(6, 9)])
        await other.end_stream("s1", "run_b")
        assert [s for s, _c in await asyncio.wait_for(first_task, 5)] == [6, 7, 8]

        second = await reader_of(web, from_sequence=2)  # a resume from a cursor inside the old tail
        assert [s for s, _c in await asyncio.wait_for(collect(second), 5)] == [3, 4, 5, 6, 7, 8]
        assert second.last_info.status == "ended"
    finally:
        await web.aclose()
        await other.aclose()


async def test_a_takeover_notice_that_overtakes_the_last_append_reply_leaves_no_tail_behind():
    web = redis_manager()
    other = another_redis_process(web)
    try:
        await web.claim_stream("s1", "run_a", epoch=1)
        await web.append("s1", "run_a", [chunk(n) for n in range(1, 5)])
        await web.create_resumable_reader("s1")  # this loop's subscription is confirmed
        write = web._write

        async def overtaken(what, fn):
            result = await write(what, fn)
            if what == "append":
                # Stored in Redis; before this process sees the reply, another process takes
                # the stream over and writes, and this process's listener handles its notices.
                noticed = web.subscribe("s1")
                await other.claim_stream("s1", "run_b", epoch=2)
                await other.append("s1", "run_b", [chunk(6, "run_b")])
                assert await asyncio.wait_for(noticed.wait(), 5)
            return result

        web._write = overtaken
        assert await web.append("s1", "run_a", [chunk(5)]) == [5]
        del web._write
        reader = await reader_of(web, from_sequence=4)
        # A reader served [5] at head 5 from a tail made after the notices would park for good.
        got = await asyncio.wait_for(collect(reader, limit=2), 5)
        assert [s for s, _c in got] == [5, 6]
    finally:
        await web.aclose()
        await other.aclose()


@pytest.mark.django_db
async def test_a_lost_subscription_empties_the_tail(private_redis):
    import redis

    web = redis_manager("helix_private")
    try:
        await web.claim_stream("s1", "run_a", epoch=1)
        await web.create_resumable_reader("s1")  # this loop's subscription is confirmed
        await web.append("s1", "run_a", [chunk(n) for n in range(1, 4)])
        assert web.tail.read("s1", 1, 500) is not None
        state = web.connections.state()
        with redis.Redis.from_url(private_redis.url) as admin:
            admin.client_kill_filter(_type="pubsub")
        # Notices published while this process was not subscribed are lost: the tail is emptied.
        for _ in range(500):
            if web.tail.read("s1", 1, 500) is None:
                break
            await asyncio.sleep(0.01)
        assert web.tail.read("s1", 1, 500) is None
        await asyncio.wait_for(state.ready.wait(), 5)
        chunks, _info = await web.read_after("s1", 1)
        assert [s for s, _c in chunks] == [2, 3]
    finally:
        await web.aclose()
