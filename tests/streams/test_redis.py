"""Redis-only behaviour of the Redis stream manager (real redis-server; unreachable Redis fails)."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.test import override_settings

from helix_django.errors import StreamConnectionError, StreamFenceError
from tests.scale.services import free_port
from tests.streams.conftest import another_redis_process, redis_manager
from tests.streams.helpers import append_and_follow, chunk, collect, parked, record_reads

pytestmark = [pytest.mark.redis]

TIMEOUT = 10
BACKEND = "helix_django.streams.redis.RedisStreamManager"


def caches(alias: str, url: str) -> dict:
    from django.conf import settings

    return {**settings.CACHES, alias: {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url}}


async def test_ttl_is_set_and_refreshed_on_every_write(redis_client):
    manager = redis_manager(stream_ttl=120)
    meta, chunks = manager.keys("s1")[:2]
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        assert 0 < redis_client.ttl(meta) <= 120
        await manager.append("s1", "run_a", [chunk(1)])
        redis_client.expire(meta, 5)
        redis_client.expire(chunks, 5)
        await manager.append("s1", "run_a", [chunk(2)])
        assert 100 < redis_client.ttl(meta) <= 120
        assert 100 < redis_client.ttl(chunks) <= 120
        redis_client.expire(meta, 5)
        redis_client.expire(chunks, 5)
        await manager.end_stream("s1", "run_a")
        assert 100 < redis_client.ttl(meta) <= 120
        assert 100 < redis_client.ttl(chunks) <= 120
    finally:
        await manager.aclose()


async def test_keys_of_a_stream_share_one_hash_slot_and_chunk_ids_are_sequences(redis_client):
    manager = redis_manager()
    try:
        meta, chunks = manager.keys("sess-9")[:2]
        assert "{sess-9}" in meta
        assert "{sess-9}" in chunks
        await manager.claim_stream("sess-9", "run_a", epoch=7)
        assert await manager.append("sess-9", "run_a", [chunk(1), chunk(2), chunk(3)]) == [1, 2, 3]
        assert [entry_id for entry_id, _ in redis_client.xrange(chunks)] == ["1-0", "2-0", "3-0"]
        stored = redis_client.hgetall(meta)
        assert {k: stored[k] for k in ("status", "head", "run_id", "epoch", "end_status", "error")} == {
            "status": "active",
            "head": "3",
            "run_id": "run_a",
            "epoch": "7",
            "end_status": "",
            "error": "",
        }
    finally:
        await manager.aclose()


async def test_a_batch_resent_after_a_lost_reply_is_stored_once(redis_client):
    manager = redis_manager()
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        append = manager._state().scripts["append"]
        args = ["run_a", 600, manager.channel, "s1", "batch-1", '{"type":"text-delta","delta":"a"}', '{"type":"x"}']
        first = await append(keys=manager.keys("s1"), args=args)
        assert first == [2, "active", "2", "run_a", "1", "", ""]  # the last sequence, then the info
        assert await append(keys=manager.keys("s1"), args=args) == first
        assert await manager.append("s1", "run_a", [chunk(3)]) == [3]
        assert [s for s, _ in await manager.read_all("s1")] == [1, 2, 3]
        assert redis_client.xlen(manager.keys("s1")[1]) == 3
    finally:
        await manager.aclose()


@pytest.mark.django_db
async def test_unreachable_redis_raises_a_typed_retryable_error_never_absent():
    dead = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(CACHES=caches("helix_dead", dead)):
        manager = redis_manager("helix_dead", WRITE_RETRY_SECONDS=0)
        for call in (
            manager.get_info("s1"),
            manager.read_after("s1", 0),
            manager.create_resumable_reader("s1"),
            manager.create_resumable_reader("s1", wait_for_live=True),
            manager.claim_stream("s1", "run_a", epoch=1),
            manager.append("s1", "run_a", [chunk(1)]),
            manager.end_stream("s1", "run_a"),
        ):
            with pytest.raises(StreamConnectionError) as excinfo:
                await call
            assert excinfo.value.is_retryable
            assert excinfo.value.to_body()["code"] == "transport_stream_connection"
        await manager.aclose()


async def test_reader_of_another_manager_instance_wakes_through_pubsub_not_polling():
    writer = redis_manager()
    other = another_redis_process(writer)
    try:
        await writer.claim_stream("s1", "run_a", epoch=1)
        reader = await other.create_resumable_reader("s1")
        reader.fail_safe_seconds = 3600
        task = asyncio.ensure_future(collect(reader))
        await parked(other, "s1")
        started = time.monotonic()
        await writer.append("s1", "run_a", [chunk(1)])
        await writer.end_stream("s1", "run_a")
        got = await asyncio.wait_for(task, TIMEOUT)
        assert [s for s, _ in got] == [1]
        assert time.monotonic() - started < 2
    finally:
        await writer.aclose()
        await other.aclose()


async def test_a_write_wakes_its_own_process_readers_once_not_again_by_its_pubsub_echo():
    manager = redis_manager()
    try:
        await manager.claim_stream("s1", "run_a", epoch=1)
        reads = record_reads(manager)
        reader = await manager.create_resumable_reader("s1")
        reader.fail_safe_seconds = 3600
        got = []

        async def follow():
            async for sequence, _chunk in reader:
                got.append(sequence)

        task = asyncio.ensure_future(follow())
        await asyncio.wait_for(reader.caught_up.wait(), TIMEOUT)  # the opening read is done
        await parked(manager, "s1")
        for n in range(1, 6):
            await append_and_follow(manager, got, n)
            await asyncio.sleep(0.05)  # long enough for this write's pub/sub notice to come back
        assert got == [1, 2, 3, 4, 5]
        assert reads == [0, 0, 1, 2, 3, 4], reads  # the opening read, then one per write (from the cursor): no echoes
        await manager.end_stream("s1", "run_a")
        await asyncio.wait_for(task, TIMEOUT)
    finally:
        await manager.aclose()


@pytest.mark.django_db
async def test_redis_restart_with_aof_keeps_acknowledged_chunks_and_never_reuses_a_sequence(private_redis):
    manager = redis_manager("helix_private", WRITE_RETRY_SECONDS=0)
    await manager.claim_stream("s1", "run_a", epoch=1)
    assert await manager.append("s1", "run_a", [chunk(i) for i in range(1, 6)]) == [1, 2, 3, 4, 5]
    reader = await manager.create_resumable_reader("s1")
    reader.fail_safe_seconds = 3600
    assert [s for s, _ in await asyncio.wait_for(collect(reader, 5), TIMEOUT)] == [1, 2, 3, 4, 5]

    private_redis.stop()
    with pytest.raises(StreamConnectionError):
        await manager.append("s1", "run_a", [chunk(6)])
    with pytest.raises(StreamConnectionError):
        await manager.get_info("s1")
    with pytest.raises(StreamConnectionError):
        await asyncio.wait_for(reader.__anext__(), TIMEOUT)

    private_redis.start()
    # The reader re-opens from its cursor: only later chunks, each once.
    assert reader.current_sequence == 5
    resumed = await manager.create_resumable_reader("s1", from_sequence=reader.current_sequence)
    resumed.fail_safe_seconds = 3600
    tail = asyncio.ensure_future(collect(resumed))
    assert await manager.append("s1", "run_a", [chunk(6), chunk(7)]) == [6, 7]
    await manager.end_stream("s1", "run_a")
    got = await asyncio.wait_for(tail, TIMEOUT)
    assert [(s, c["delta"]) for s, c in got] == [(6, "c6 "), (7, "c7 ")]
    everything = await manager.read_all("s1")
    assert [s for s, _ in everything] == [1, 2, 3, 4, 5, 6, 7]
    # The claim survived the restart: a stale run is still fenced.
    with pytest.raises(StreamFenceError):
        await manager.claim_stream("s1", "run_old", epoch=0)
    await manager.aclose()


@pytest.mark.django_db
async def test_a_parked_reader_wakes_after_the_subscription_reconnects(private_redis):
    writer = redis_manager("helix_private")
    follower = another_redis_process(writer)
    await writer.claim_stream("s1", "run_a", epoch=1)
    await writer.append("s1", "run_a", [chunk(1)])
    reader = await follower.create_resumable_reader("s1", from_sequence=1)
    reader.fail_safe_seconds = 3600
    private_redis.stop()
    private_redis.start()
    nxt = asyncio.ensure_future(reader.__anext__())
    await parked(follower, "s1")
    # Published before or after the follower re-subscribed: either way it is delivered.
    await writer.append("s1", "run_a", [chunk(2)])
    seq, item = await asyncio.wait_for(nxt, TIMEOUT)
    assert (seq, item["delta"]) == (2, "c2 ")
    await writer.aclose()
    await follower.aclose()


@pytest.mark.django_db
async def test_a_write_during_a_short_restart_is_resent_and_stored_once(private_redis):
    manager = redis_manager("helix_private", WRITE_RETRY_SECONDS=15)
    await manager.claim_stream("s1", "run_a", epoch=1)
    assert await manager.append("s1", "run_a", [chunk(1)]) == [1]
    private_redis.stop()
    pending = asyncio.ensure_future(manager.append("s1", "run_a", [chunk(2), chunk(3)]))
    await asyncio.sleep(0.5)
    assert not pending.done()
    with pytest.raises(StreamConnectionError):
        await manager.get_info("s1")  # reads never wait: typed at once
    await asyncio.to_thread(private_redis.start)
    assert await asyncio.wait_for(pending, TIMEOUT) == [2, 3]
    assert [s for s, _ in await manager.read_all("s1")] == [1, 2, 3]
    await manager.aclose()


async def test_a_reader_built_directly_wakes_through_pubsub_started_by_its_first_wait():
    from helix_django.streams.reader import ResumableReader

    writer = redis_manager()
    other = another_redis_process(writer)
    try:
        info = await writer.claim_stream("s1", "run_a", epoch=1)
        reader = ResumableReader(other, "s1", from_sequence=0, wait_for_live=False, info=info)
        reader.fail_safe_seconds = 3600
        task = asyncio.ensure_future(collect(reader))
        await parked(other, "s1")
        # Written before or after the follower's subscription is confirmed: delivered either way.
        await writer.append("s1", "run_a", [chunk(1)])
        await writer.end_stream("s1", "run_a")
        got = await asyncio.wait_for(task, TIMEOUT)
        assert [s for s, _ in got] == [1]
    finally:
        await writer.aclose()
        await other.aclose()


def test_a_connection_alias_that_is_not_a_django_redis_cache_is_a_check_error():
    from django.core.checks import run_checks

    bad = {"default": {"BACKEND": BACKEND, "OPTIONS": {"CONNECTION_ALIAS": "default"}}}
    with override_settings(HELIX={"STREAM_MANAGERS": bad}):
        assert "helix_django.E010" in [m.id for m in run_checks()]
    good = {"default": {"BACKEND": BACKEND, "OPTIONS": {"CONNECTION_ALIAS": "helix"}}}
    with override_settings(HELIX={"STREAM_MANAGERS": good}):
        assert "helix_django.E010" not in [m.id for m in run_checks()]


def test_clients_of_finished_event_loops_are_dropped():
    from asgiref.sync import async_to_sync

    manager = redis_manager()
    for _ in range(3):
        assert async_to_sync(manager.get_info)("missing") is None
    # Each async_to_sync call ran on its own short-lived loop: at most the last one is kept.
    assert len(manager._states) <= 1


async def test_a_stream_recreated_after_its_keys_expired_never_reuses_a_sequence(redis_client):
    """A client may still hold a cursor of the expired stream: the new claim starts after the old head."""
    manager = redis_manager(stream_ttl=120)
    meta, chunks = manager.keys("s-expired")[:2]
    try:
        await manager.claim_stream("s-expired", "run_a", epoch=1)
        assert await manager.append("s-expired", "run_a", [chunk(1), chunk(2), chunk(3)]) == [1, 2, 3]
        await manager.end_stream("s-expired", "run_a")
        redis_client.delete(meta, chunks)  # what the TTL does to an idle stream
        assert await manager.get_info("s-expired") is None

        info = await manager.claim_stream("s-expired", "run_b", epoch=2)
        assert info.head_sequence == 3
        assert await manager.append("s-expired", "run_b", [chunk(4)]) == [4]
        assert 0 < redis_client.ttl(meta) <= 120
    finally:
        await manager.aclose()
