"""The database manager's fast paths keep the contract (docs/performance.md).

Group commit: concurrent appends share one transaction, a fenced one fails alone.
Tail cache: a live reader in the writing process is served without a query, every
hit decodes fresh dicts, and status changes are still read from the database.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from helix_django.errors import StreamFenceError
from helix_django.models import StreamChunk
from helix_django.streams.database import DatabaseStreamManager

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"c{n} "}


async def test_concurrent_appends_of_many_streams_share_one_transaction():
    manager = DatabaseStreamManager("default", {})
    for i in range(5):
        await manager.claim_stream(f"s{i}", f"run_{i}", epoch=1)
    batches = []
    original = manager.group.statements

    def counting(cursor, placeholder, requests, lock):  # the statements of a group commit, wherever they run
        batches.append(len(requests))
        return original(cursor, placeholder, requests, lock)

    manager.group.statements = counting
    results = await asyncio.gather(*(manager.append(f"s{i % 5}", f"run_{i % 5}", [delta(i)]) for i in range(20)))
    assert sorted(seq for r in results for seq in r) == sorted([1, 2, 3, 4] * 5)
    assert sum(batches) == 20
    assert len(batches) < 20
    for i in range(5):
        stored = await asyncio.to_thread(
            lambda i=i: list(StreamChunk.objects.filter(stream_id=f"s{i}").values_list("sequence", flat=True))
        )
        assert stored == [1, 2, 3, 4]
        assert (await manager.get_info(f"s{i}")).head_sequence == 4


async def test_a_fenced_append_in_a_group_commit_fails_alone():
    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("a", "run_a", epoch=1)
    await manager.claim_stream("b", "run_b", epoch=1)
    ok, fenced = await asyncio.gather(
        manager.append("a", "run_a", [delta(1), delta(2)]),
        manager.append("b", "run_stale", [delta(1)]),
        return_exceptions=True,
    )
    assert ok == [1, 2]
    assert isinstance(fenced, StreamFenceError)
    assert (await manager.get_info("b")).head_sequence == 0
    assert (await manager.read_after("a", 0))[0] == [(1, delta(1)), (2, delta(2))]


async def test_a_live_reader_in_the_writing_process_is_served_without_a_query():
    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1), delta(2), delta(3)])
    calls = []
    manager._read_sync = lambda *args: calls.append(args)  # any database read would be recorded
    chunks, info = await manager.read_after("s1", 1)
    assert chunks == [(2, delta(2)), (3, delta(3))]
    assert (info.head_sequence, info.status, info.run_id) == (3, "active", "run_a")
    chunks[0][1]["delta"] = "mutated by one reader"
    again, _info = await manager.read_after("s1", 1)
    assert again[0][1] == delta(2)  # every hit decodes its own dicts
    assert await manager.read_after("s1", 3) == ([], info)  # caught up: answered from the tail too
    assert calls == []


async def test_reads_outside_the_tail_or_after_a_status_change_go_to_the_database():
    manager = DatabaseStreamManager("default", {"TAIL_CHUNKS": 2})
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1), delta(2), delta(3)])
    assert manager.tail.read("s1", 0, 500) is None  # sequence 1 fell out of a 2-chunk tail
    chunks, _info = await manager.read_after("s1", 0)
    assert [seq for seq, _chunk in chunks] == [1, 2, 3]
    await manager.end_stream("s1", "run_a")
    assert manager.tail.read("s1", 3, 500, allow_empty=True) is None
    reader = await manager.create_resumable_reader("s1", from_sequence=3)
    assert [item async for item in reader] == []
    assert reader.last_info.status == "ended"


async def test_the_tail_can_be_disabled():
    manager = DatabaseStreamManager("default", {"TAIL_CHUNKS": 0})
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1)])
    assert manager.tail.read("s1", 0, 500) is None
    assert (await manager.read_after("s1", 0))[0] == [(1, delta(1))]


@pytest.fixture(params=[True, False], ids=["returning", "without-returning"])
async def returning(request, monkeypatch):
    """Whether the database answers ``RETURNING`` (SQLite < 3.35 does not), set on the ORM thread's connection."""

    def on_orm_thread():
        monkeypatch.setattr(connection.features, "can_return_columns_from_insert", request.param)

    await sync_to_async(on_orm_thread)()
    return request.param


async def counted(fn, *args):
    """Run the manager's sync ``fn(*args)`` on the ORM thread; return (its result, statements executed)."""

    def run():
        with CaptureQueriesContext(connection) as queries:
            return fn(*args), len(queries)

    return await sync_to_async(run)()


async def test_the_claim_upsert_keeps_the_fence(returning):
    manager = DatabaseStreamManager("default", {})
    first, statements = await counted(manager._claim_sync, "s1", "run_a", 3)
    assert statements == (1 if returning else 4)  # one upsert (or BEGIN, upsert, SELECT, COMMIT)
    assert (first.status, first.run_id, first.epoch, first.head_sequence) == ("active", "run_a", 3, 0)
    await manager.append("s1", "run_a", [delta(1), delta(2)])
    await manager.fail_stream("s1", "run_a", {"error": "boom", "code": "provider_error"})
    again = await manager.claim_stream("s1", "run_a", epoch=3)  # the holder's own claim, repeated
    assert (again.status, again.head_sequence, again.error, again.end_status) == ("active", 3, None, "")
    for stale in (("run_b", 2), ("run_b", 3), ("run_a", 2)):
        with pytest.raises(StreamFenceError) as excinfo:
            await manager.claim_stream("s1", stale[0], epoch=stale[1])
        assert excinfo.value.cause == "stale_claim"
    taken = await manager.claim_stream("s1", "run_c", epoch=4)
    assert (taken.run_id, taken.epoch, taken.head_sequence) == ("run_c", 4, 3)
    await manager.purge_stream("s1")  # nobody holds a purged stream: any epoch claims it
    assert (await manager.claim_stream("s1", "run_d", epoch=1)).run_id == "run_d"


async def test_ending_and_pausing_are_fenced_on_the_claiming_run(returning):
    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1)])
    for stale in (manager.end_stream("s1", "run_b"), manager.pause_stream("s1", "run_b")):
        with pytest.raises(StreamFenceError):
            await stale
    paused = await manager.pause_stream("s1", "run_a")
    assert (paused.status, paused.run_id, paused.head_sequence, paused.end_status) == ("paused", "run_a", 1, "")
    await manager.claim_stream("s1", "run_a", epoch=1)
    ended, statements = await counted(manager._status_sync, "s1", "run_a", "ended", {"end_status": "cancelled"})
    assert (ended.status, ended.end_status, ended.head_sequence) == ("ended", "cancelled", 1)
    assert statements == (1 if returning else 4)  # one UPDATE .. RETURNING (or BEGIN, SELECT, UPDATE, COMMIT)
    assert (await manager.get_info("s1")).status == "ended"
