"""An append never waits behind another batch whose commit failed and is being retried.

The disk-full fault of ``tests/scale/test_database_faults.py`` lost committed chunks (issue
23's INLINE_WRITES note): a run whose flush kept failing was interrupted by the relaunch
scan, whose close of the stream (``recovery/outcomes.py``, ``aclose_stream``: re-claim,
``helix-run-end``, fail) queued its append behind the run's failing batch, which held the
group commit's queue through its backoff (up to 1 s a retry). For that long the run was
recorded ``interrupted`` with the stream not failed yet, so a resume got 204 ("you hold
it all"), and then the stuck batch and the recovery's error chunk were stored after it.

A batch whose commit fails transiently now retries on its own task; appends queued
meanwhile commit at once. The failure is real: SQLite's ``max_page_count`` on the ORM
thread's connection makes an INSERT needing new pages fail with SQLITE_FULL, while a small
one that fits the pages the file has goes through.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from helix_django.streams.database import DatabaseStreamManager

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="max_page_count is SQLite's"),
]


def delta(text: str) -> dict:
    return {"type": "text-delta", "id": "t", "delta": text}


def _cap_pages() -> int:
    """Cap the database at its current size on this (the ORM's) thread's connection; return a payload size that needs more."""
    connection.ensure_connection()
    with connection.cursor() as cursor:
        pages = cursor.execute("PRAGMA page_count").fetchone()[0]
        free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
        size = cursor.execute("PRAGMA page_size").fetchone()[0]
        cursor.execute(f"PRAGMA max_page_count = {pages}")
    return (free + 64) * size


def _uncap_pages() -> None:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA max_page_count = 4294967294")


@pytest.mark.parametrize("options", [{"INLINE_WRITES": False}, {"INLINE_WRITES": True}], ids=["orm_thread", "inline"])
async def test_an_append_commits_while_another_batch_waits_to_retry_a_full_disk(options):
    manager = DatabaseStreamManager("default", options)
    await manager.claim_stream("big", "run_a", epoch=1)
    await manager.claim_stream("small", "run_b", epoch=1)
    big_size = await sync_to_async(_cap_pages, thread_sensitive=True)()
    if manager.group.inline is not None:  # the loop's own connection gets the same cap
        inline = manager.group.inline._connection()
        inline.execute(f"PRAGMA max_page_count = {inline.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        big = asyncio.ensure_future(manager.append("big", "run_a", [delta("x" * big_size)]))
        await asyncio.sleep(0.02)  # its commit failed (SQLITE_FULL): it waits to retry
        assert not big.done()
        small = await asyncio.wait_for(manager.append("small", "run_b", [delta("y")]), 0.5)
        assert small == [1]
        assert not big.done()  # still retrying: the small one did not wait for it
    finally:
        await sync_to_async(_uncap_pages, thread_sensitive=True)()
        if manager.group.inline is not None:
            manager.group.inline._connection().execute("PRAGMA max_page_count = 4294967294")
    assert await asyncio.wait_for(big, 5) == [1]  # committed by its retry once the disk has room
    manager.tail.forget("big")
    chunks, info = await manager.read_after("big", 0)
    assert [seq for seq, _chunk in chunks] == [1] and len(chunks[0][1]["delta"]) == big_size
    await manager.aclose()
