"""A reader in the process that writes a Redis stream is served from the process's tail, not from Redis.

The Redis manager keeps the chunks it appended last, once Redis acknowledged them, with
the info that write committed (:mod:`helix_django.streams.tail`). A reader of that
process following the run live wakes on the local write and takes the new chunks from
memory: redis-server, watched through MONITOR, receives the appends and no read. A reader
whose cursor lies before the tail, or one after a status change, still reads Redis.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import redis_url
from tests.streams.conftest import redis_manager
from tests.streams.helpers import RedisMonitor, append_and_follow, chunk, collect, live_followers

pytestmark = [pytest.mark.redis]

TIMEOUT = 10


def command_names(commands: list[str]) -> list[str]:
    return [text.split(" ", 1)[0].upper() for text in commands]


async def test_readers_beside_the_writer_follow_a_run_without_reading_redis():
    manager = redis_manager()
    monitor = RedisMonitor(redis_url(), manager.key_prefix)
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        readers, got, tasks = await live_followers(manager, 3)
        await monitor.settle()
        monitor.commands.clear()

        for n in range(1, 21):
            await append_and_follow(manager, got[0], n)
            for into in got[1:]:
                for _ in range(10_000):
                    if len(into) == n:
                        break
                    await asyncio.sleep(0)
        assert got == [list(range(1, 21))] * 3
        commands = await monitor.settle()
        # The twenty appends' script calls (one more where Redis had to load the script) and
        # nothing else: no HMGET, no XRANGE.
        names = command_names(commands)
        assert set(names) == {"EVALSHA"}, [text[:80] for text in commands]
        assert 20 <= len(names) <= 21

        await manager.end_stream("s1", "run_a")
        await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        assert [reader.last_info.status for reader in readers] == ["ended"] * 3
    finally:
        monitor.close()
        await manager.aclose()


async def test_each_reader_gets_its_own_chunks_with_what_the_writer_stored():
    manager = redis_manager()
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        stored = [chunk(1), {"type": "tool-input-available", "toolCallId": "c1", "input": {"q": ["a", 1]}}]
        assert await manager.append("s1", "run_a", stored) == [1, 2]
        first, info = await manager.read_after("s1", 0)
        assert first == [(1, stored[0]), (2, stored[1])]
        assert (info.status, info.head_sequence, info.run_id, info.epoch) == ("active", 2, "run_a", 1)
        first[0][1]["delta"] = "changed by one reader"
        first[1][1]["input"]["q"].append("changed")
        second, _info = await manager.read_after("s1", 0)
        assert second == [(1, stored[0]), (2, stored[1])]
        assert (await manager.read_after("s1", 2)) == ([], info)  # caught up
    finally:
        await manager.aclose()


async def test_a_cursor_before_the_tail_or_a_status_change_reads_redis():
    manager = redis_manager(TAIL_CHUNKS=2)
    monitor = RedisMonitor(redis_url(), manager.key_prefix)
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        await manager.create_resumable_reader("s1")  # this loop's subscription is confirmed
        await manager.append("s1", "run_a", [chunk(n) for n in range(1, 4)])
        await monitor.settle()
        monitor.commands.clear()
        chunks, _info = await manager.read_after("s1", 0)  # sequence 1 fell out of a 2-chunk tail
        assert [s for s, _c in chunks] == [1, 2, 3]
        assert [s for s, _c in (await manager.read_after("s1", 1))[0]] == [2, 3]  # inside the tail
        assert "XRANGE" in command_names(await monitor.settle())
        monitor.commands.clear()
        await manager.end_stream("s1", "run_a")
        reader = await manager.create_resumable_reader("s1", from_sequence=3)
        assert [item async for item in reader] == []
        assert reader.last_info.status == "ended"
        assert "XRANGE" in command_names(await monitor.settle())
    finally:
        monitor.close()
        await manager.aclose()


async def test_the_tail_can_be_disabled():
    manager = redis_manager(TAIL_CHUNKS=0)
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        reader = await manager.create_resumable_reader("s1")
        await manager.append("s1", "run_a", [chunk(1)])
        await manager.end_stream("s1", "run_a")
        assert [s for s, _c in await asyncio.wait_for(collect(reader), TIMEOUT)] == [1]
        assert manager.tail.read("s1", 0, 500) is None
    finally:
        await manager.aclose()
