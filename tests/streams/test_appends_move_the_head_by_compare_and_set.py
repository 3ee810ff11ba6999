"""A stream's next append compares its row with the info this process committed instead of reading it.

The database manager's group commit (helix_django/streams/database/_group_commit.py) skips the
SELECT of the stream rows when every stream of a batch has an info this process
committed (its tail cache): each head moves by a compare-and-set UPDATE. A row another
process changed since (a new claim, a moved head, an ended stream) fails the compare,
and the batch runs again from the rows: the fence and the sequences stay exact.
Each case runs on the event loop's inline connection (SQLite) and on the ORM's thread.
"""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection, transaction

from helix_django.errors import StreamFenceError
from helix_django.models import StreamChunk
from helix_django.streams.database import DatabaseStreamManager

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"c{n} "}


@pytest.fixture(params=[True, False], ids=["inline", "orm-thread"])
def options(request):
    return {"INLINE_WRITES": request.param}


def count_stream_reads(manager: DatabaseStreamManager) -> list[int]:
    """Record the number of stream rows each group commit reads (wherever it runs)."""
    reads: list[int] = []
    original = manager.group._select_infos

    def counting(cursor, placeholder, stream_ids, *, lock):
        reads.append(len(stream_ids))
        return original(cursor, placeholder, stream_ids, lock=lock)

    manager.group._select_infos = counting
    return reads


@pytest.fixture
async def processes(options):
    """Two managers, as two processes: ``here`` claimed stream "s" for run_a and wrote chunks 1 and 2 (known)."""
    here, there = DatabaseStreamManager("default", options), DatabaseStreamManager("default", options)
    await here.claim_stream("s", "run_a", epoch=1)
    assert await here.append("s", "run_a", [delta(1)]) == [1]
    assert await here.append("s", "run_a", [delta(2)]) == [2]
    yield here, there
    await here.aclose()
    await there.aclose()


async def stored_sequences(stream_id: str) -> list[int]:
    return await asyncio.to_thread(
        lambda: list(StreamChunk.objects.filter(stream_id=stream_id).values_list("sequence", flat=True))
    )


async def test_an_append_after_this_process_committed_the_stream_reads_no_stream_row(options):
    manager = DatabaseStreamManager("default", options)
    await manager.claim_stream("s", "run_a", epoch=1)
    reads = count_stream_reads(manager)
    assert await manager.append("s", "run_a", [delta(1)]) == [1]  # nothing known yet: the row is read
    assert await manager.append("s", "run_a", [delta(2), delta(3)]) == [2, 3]
    assert await manager.append("s", "run_a", [delta(4)]) == [4]
    assert reads == [1]
    assert (await manager.get_info("s")).head_sequence == 4
    assert await stored_sequences("s") == [1, 2, 3, 4]
    await manager.aclose()


async def test_a_head_another_process_moved_is_read_and_the_append_continues_after_it(processes):
    here, there = processes
    # The same run reclaimed by another process (a recovery, a higher epoch) writes on.
    await there.claim_stream("s", "run_a", epoch=2)
    assert await there.append("s", "run_a", [delta(3), delta(4), delta(5)]) == [3, 4, 5]
    reads = count_stream_reads(here)
    assert await here.append("s", "run_a", [delta(6)]) == [6]
    assert reads == [1]  # the compare failed; the retry read the row
    assert await stored_sequences("s") == [1, 2, 3, 4, 5, 6]
    assert await here.append("s", "run_a", [delta(7)]) == [7]
    assert reads == [1]  # known again from that commit


async def test_a_claim_another_process_took_fences_a_known_stream(processes):
    here, there = processes
    await there.claim_stream("s", "run_b", epoch=2)
    with pytest.raises(StreamFenceError) as raised:
        await here.append("s", "run_a", [delta(3)])
    assert raised.value.cause == "stream_claimed_by_other_run"
    assert await there.append("s", "run_b", [delta(3)]) == [3]
    assert await stored_sequences("s") == [1, 2, 3]


async def test_a_stream_another_process_ended_refuses_a_known_append(processes):
    here, there = processes
    await there.end_stream("s", "run_a")
    with pytest.raises(StreamFenceError) as raised:
        await here.append("s", "run_a", [delta(3)])
    assert raised.value.cause == "stream_not_active"
    assert await stored_sequences("s") == [1, 2]
    info = await here.get_info("s")
    assert (info.status, info.head_sequence) == ("ended", 2)


async def test_a_batch_with_one_unknown_stream_reads_every_row_of_it(options):
    manager = DatabaseStreamManager("default", options)
    for name in ("a", "b"):
        await manager.claim_stream(name, f"run_{name}", epoch=1)
    await manager.append("a", "run_a", [delta(1)])  # "a" is known from here on, "b" is not
    reads = count_stream_reads(manager)
    results = await asyncio.gather(manager.append("a", "run_a", [delta(2)]), manager.append("b", "run_b", [delta(1)]))
    assert results == [[2], [1]]
    assert sum(reads) == 2  # both rows read (in one commit or two): the streams are locked in id order
    assert await stored_sequences("a") == [1, 2]
    assert await stored_sequences("b") == [1]
    await manager.aclose()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL pass only: SQLite sorts by code point")
async def test_the_rows_read_for_a_batch_are_locked_in_the_order_the_compare_and_set_locks_them():
    """Under a locale collation ORDER BY alone sorts "a" before "B"; ``sorted()`` (the compare-and-set
    order) puts "B" first. Both paths must lock in one order, or two processes deadlock."""
    assert await asyncio.to_thread(_lock_order_under_a_locale_collation) == sorted(["a", "B"]) == ["B", "a"]


def _lock_order_under_a_locale_collation() -> list[str]:
    from helix_django.streams.database._group_commit import INFO_COLUMNS, GroupCommit
    from helix_django.streams.database._writes import info_of

    table = "helix_test_icu_streams"
    columns = ", ".join(f"{name} text" for name in INFO_COLUMNS.split(", "))
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_collation WHERE collname = 'en-US-x-icu'")
        if cursor.fetchone() is None:  # a PostgreSQL built without ICU: no locale collation to compare with
            pytest.skip("this PostgreSQL has no ICU collation")
        cursor.execute(f'CREATE TABLE {table} (stream_id varchar(64) COLLATE "en-US-x-icu" PRIMARY KEY, {columns})')
        try:
            for stream_id in ("a", "B"):
                cursor.execute(
                    f"INSERT INTO {table} VALUES (%s, 'active', '0', 'run', '1', '', NULL)",  # noqa: S608
                    [stream_id],
                )
            group = GroupCommit("default", chunk_table="unused", stream_table=table, encode=str, info_of=info_of)
            with transaction.atomic():
                return list(group._select_infos(cursor, "%s", sorted(["a", "B"]), lock=True))
        finally:
            cursor.execute(f"DROP TABLE {table}")
