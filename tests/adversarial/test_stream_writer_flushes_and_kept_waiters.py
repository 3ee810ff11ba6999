"""Adversarial tests of the chained StreamWriter and the readers' kept waiter (every backend)."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest

from helix_django.errors import StreamFenceError
from helix_django.streams.writer import StreamWriter
from tests.streams.helpers import chunk, parked, stored

pytestmark = pytest.mark.django_db(transaction=True)


async def test_max_chunks_flushes_even_while_the_interval_timer_is_armed(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=60_000, max_chunks=3)
    writer.write(chunk(0))  # leading edge: stored at once
    assert await writer.flush() == 1
    for n in range(1, 4):  # the interval has not passed: a timer is armed, then max_chunks is reached
        writer.write(chunk(n))
    assert len(await stored(manager, "s1", 4)) == 4


async def test_cancelling_a_task_inside_flush_neither_loses_nor_duplicates_chunks(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=60_000, max_chunks=1000)
    for n in range(50):
        writer.write(chunk(n))
        if n % 7 == 0:
            task = asyncio.ensure_future(writer.flush())
            await asyncio.sleep(0)
            task.cancel()  # inside flush() (the memory manager may have finished already)
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert await writer.flush() == 50
    assert [c["delta"] for _s, c in await manager.read_all("s1")] == [f"c{n} " for n in range(50)]


async def test_a_fence_error_from_a_background_append_surfaces_on_the_next_write_and_flush(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=0)
    writer.write(chunk(0))
    await writer.flush()
    await manager.claim_stream("s1", "run_b", epoch=2)
    writer.write(chunk(1))  # sent at once, refused by the fence
    for _ in range(200):
        await asyncio.sleep(0.005)
        if writer._inflight is None:
            break

    with pytest.raises(StreamFenceError):
        writer.write(chunk(2))
    with pytest.raises(StreamFenceError):
        await writer.flush()
    assert [c["delta"] for _s, c in await manager.read_all("s1")] == ["c0 "]


async def test_concurrent_flushes_with_coalescing_store_every_character_once(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1, max_chunks=4, coalesce_deltas=True)

    async def produce(start: int) -> None:
        for n in range(start, start + 40):
            writer.write(chunk(n))
            if n % 5 == 0:
                await writer.flush()
            await asyncio.sleep(0)

    await asyncio.gather(produce(0), produce(40), produce(80))
    await writer.flush()
    text = "".join(c["delta"] for _s, c in await manager.read_all("s1"))
    assert sorted(text.split()) == sorted(f"c{n}" for n in range(120))


async def test_a_reader_abandoned_after_reaching_the_head_leaves_no_waiter(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1), chunk(2)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    async for _sequence, _chunk in reader:
        break  # the consumer stops without close(); the read reached the head
    del reader
    gc.collect()
    await asyncio.sleep(0)
    assert manager.notifier.waiter_count("s1") == 0


async def test_a_kept_waiter_wakes_for_the_end_of_the_stream(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    first = await reader.__anext__()
    assert first[0] == 1
    rest = asyncio.ensure_future(asyncio.wait_for(_drain(reader), 5))
    await parked(manager, "s1")
    await manager.append("s1", "run_a", [chunk(2)])
    await manager.end_stream("s1", "run_a")
    assert [s for s, _c in await rest] == [2]
    assert reader.last_info.status == "ended"
    assert manager.notifier.waiter_count("s1") == 0


async def test_close_from_another_task_releases_a_kept_waiter(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    await reader.__anext__()
    assert manager.notifier.waiter_count("s1") == 1  # kept for the next wait
    await reader.close()
    assert manager.notifier.waiter_count("s1") == 0
    with pytest.raises(StopAsyncIteration):
        await reader.__anext__()


async def _drain(reader) -> list:
    return [item async for item in reader]


def _rename(old: str, new: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")


async def test_a_database_error_mid_append_surfaces_typed_on_the_next_flush_and_write():
    from asgiref.sync import sync_to_async

    from helix_django.errors import StreamConnectionError
    from helix_django.models import StreamChunk
    from helix_django.streams.database import DatabaseStreamManager

    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=0)
    writer.write(chunk(1))
    assert await writer.flush() == 1
    table = StreamChunk._meta.db_table
    await sync_to_async(_rename)(table, "helix_chunk_gone")
    try:
        writer.write(chunk(2))
        writer.write(chunk(3))  # chained behind the failing append
        with pytest.raises(StreamConnectionError) as excinfo:
            await writer.flush()
        assert excinfo.value.is_retryable
        with pytest.raises(StreamConnectionError):
            writer.write(chunk(4))
    finally:
        await sync_to_async(_rename)("helix_chunk_gone", table)
    assert [s for s, _c in await manager.read_all("s1")] == [1]
    assert (await manager.get_info("s1")).head_sequence == 1


async def test_many_readers_holding_kept_waiters_follow_a_pause_a_failure_or_a_new_claim(manager):
    for kind in ("pause", "fail", "claim"):
        stream_id = f"s-{kind}"
        await manager.claim_stream(stream_id, "run_a", epoch=1)
        await manager.append(stream_id, "run_a", [chunk(1)])
        readers = [await manager.create_resumable_reader(stream_id, from_sequence=0) for _ in range(5)]
        for reader in readers:
            reader.fail_safe_seconds = 3600
            assert (await reader.__anext__())[0] == 1  # each now keeps a waiter
        assert manager.notifier.waiter_count(stream_id) == 5
        tasks = [asyncio.ensure_future(_drain(reader)) for reader in readers]
        await asyncio.sleep(0.01)
        added, status = await _transition_on(manager, stream_id, kind)
        for task, reader in zip(tasks, readers, strict=True):
            got = await asyncio.wait_for(task, 5)
            assert [s for s, _c in got] == added, (kind, got)
            assert reader.last_info.status == status
        assert manager.notifier.waiter_count(stream_id) == 0


async def _transition_on(manager, stream_id: str, kind: str) -> tuple[list[int], str]:
    if kind == "pause":
        await manager.pause_stream(stream_id, "run_a")
        return [], "paused"
    if kind == "fail":
        await manager.fail_stream(stream_id, "run_a", {"error": "x", "code": "provider_error", "retryable": False})
        return [2], "failed"  # a failed stream ends with its stored error chunk
    await manager.claim_stream(stream_id, "run_b", epoch=2)
    await manager.append(stream_id, "run_b", [chunk(2, "run_b"), chunk(3, "run_b")])
    await manager.end_stream(stream_id, "run_b")
    return [2, 3], "ended"


FAIL_SAFE = 1234.5  # a fail-safe period no other timer of these tests uses


async def test_a_live_reader_arms_one_fail_safe_timer_per_period_not_one_per_wait(manager, monkeypatch):
    """A reader parks once per stored chunk; each park used to schedule (and cancel) its own timer."""
    await manager.claim_stream("s1", "run_a", epoch=1)
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    reader.fail_safe_seconds = FAIL_SAFE
    loop = asyncio.get_running_loop()
    fail_safe_timers = []
    schedule = loop.call_later

    def spy(delay, callback, *args, **kwargs):
        if delay == FAIL_SAFE:
            fail_safe_timers.append(callback)
        return schedule(delay, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_later", spy)
    follow = asyncio.ensure_future(_drain(reader))
    for n in range(20):
        await parked(manager, "s1")  # the reader waits for the next chunk each time
        await manager.append("s1", "run_a", [chunk(n)])
    await parked(manager, "s1")
    await manager.end_stream("s1", "run_a")
    assert [c["delta"] for _s, c in await asyncio.wait_for(follow, 5)] == [f"c{n} " for n in range(20)]
    assert len(fail_safe_timers) == 1
