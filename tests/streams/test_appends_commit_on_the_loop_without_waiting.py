"""On SQLite in WAL mode a flush commits on the event loop, never waits for a lock, and falls back to the ORM's thread.

helix_django/streams/database/_group_commit.py: the thread hop per flush cost twice the transaction;
an inline commit skips it where a commit can neither wait (zero busy timeout) nor sync
(WAL, ``synchronous`` NORMAL). Locked or failed: the batch goes through the ORM's thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest
from django.db import connection

from helix_django.streams.database import DatabaseStreamManager
from helix_django.streams.database import _group_commit as group_commit
from helix_django.streams.database._inline_sqlite import CHECKPOINT_EVERY, _open

pytestmark = pytest.mark.django_db(transaction=True)
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="the inline commit is SQLite's")
#: Inline commits are the default (``INLINE_WRITES``); the tests name the option all the same.
INLINE = {"INLINE_WRITES": True}


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"c{n} "}


def hop_counter(manager: DatabaseStreamManager) -> list[str]:
    """Record every trip of ``manager`` to the ORM's thread (its ``_call``)."""
    hops: list[str] = []
    original = manager._call

    async def counting(what, fn, *args, **kwargs):
        hops.append(what)
        return await original(what, fn, *args, **kwargs)

    manager._call = counting
    return hops


@sqlite_only
async def test_a_flush_commits_on_the_loop_with_no_thread_hop():
    manager = DatabaseStreamManager("default", INLINE)
    await manager.claim_stream("s1", "run_a", epoch=1)
    hops = hop_counter(manager)
    for n in range(1, 21):
        assert await manager.append("s1", "run_a", [delta(n)]) == [n]
    assert hops == []
    assert manager.group.inline.commits == 20
    manager.tail.forget("s1")  # read back from the database, not the tail
    chunks, info = await manager.read_after("s1", 0)
    assert [seq for seq, _chunk in chunks] == list(range(1, 21)) and info.head_sequence == 20


@sqlite_only
async def test_a_locked_database_sends_the_flush_to_the_orm_thread_and_the_loop_never_waits():
    manager = DatabaseStreamManager("default", INLINE)
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1)])
    hops = hop_counter(manager)
    holder = sqlite3.connect(str(connection.settings_dict["NAME"]), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction holds the lock
    try:
        started = time.perf_counter()
        append = asyncio.ensure_future(manager.append("s1", "run_a", [delta(2)]))
        ticks = 0
        while time.perf_counter() - started < 0.3:  # the loop keeps running while the lock is held
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks >= 10 and not append.done()
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert await asyncio.wait_for(append, 10) == [2]
    assert hops == ["append"]  # the batch went through the ORM's thread, which waited for the lock


@sqlite_only
async def test_a_fenced_append_committed_inline_fails_alone():
    manager = DatabaseStreamManager("default", INLINE)
    await manager.claim_stream("a", "run_a", epoch=1)
    await manager.claim_stream("b", "run_b", epoch=1)
    hops = hop_counter(manager)
    ok, fenced = await asyncio.gather(
        manager.append("a", "run_a", [delta(1)]), manager.append("b", "run_x", [delta(1)]), return_exceptions=True
    )
    assert ok == [1] and type(fenced).__name__ == "StreamFenceError" and hops == []
    assert (await manager.get_info("b")).head_sequence == 0


@sqlite_only
async def test_the_wal_is_checkpointed_on_the_orm_thread_every_so_many_inline_commits(monkeypatch):
    manager = DatabaseStreamManager("default", INLINE)
    await manager.claim_stream("s1", "run_a", epoch=1)
    checkpoints: list[int] = []
    monkeypatch.setattr(manager.group, "checkpoint_sync", lambda: checkpoints.append(manager.group.inline.commits))
    for n in range(1, CHECKPOINT_EVERY + 2):
        await manager.append("s1", "run_a", [delta(n)])
    await asyncio.sleep(0.2)
    # One checkpoint, due at the 500th commit; it counts the commits when the ORM's thread
    # runs it, which may come after the next inline commit.
    assert len(checkpoints) == 1 and CHECKPOINT_EVERY <= checkpoints[0] <= CHECKPOINT_EVERY + 1, checkpoints


def test_commits_that_could_wait_or_sync_are_never_made_on_the_loop(tmp_path):
    rollback_journal = tmp_path / "journal.sqlite3"
    sqlite3.connect(rollback_journal).execute("CREATE TABLE t (x)")
    assert _open(str(rollback_journal), {}) is None  # DELETE journal: every commit syncs
    wal_full = tmp_path / "wal.sqlite3"
    assert _open(str(wal_full), {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL"}) is None
    assert _open("file:memdb1?mode=memory&cache=shared", {}) is None
    opened = _open(str(wal_full), {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"})
    assert opened is not None
    assert opened.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    opened.close()


@sqlite_only
async def test_inline_commits_are_the_default_on_sqlite_in_wal():
    manager = DatabaseStreamManager("default", {})
    await manager.claim_stream("s1", "run_a", epoch=1)
    hops = hop_counter(manager)
    assert await manager.append("s1", "run_a", [delta(1)]) == [1]
    assert hops == [] and manager.group.inline.commits == 1
    await manager.aclose()


async def test_the_option_turns_inline_commits_off():
    manager = DatabaseStreamManager("default", {"INLINE_WRITES": False})
    await manager.claim_stream("s1", "run_a", epoch=1)
    hops = hop_counter(manager)
    assert await manager.append("s1", "run_a", [delta(1)]) == [1]
    assert hops == ["append"] and manager.group.inline is None
    assert group_commit.RAW_BEGIN[connection.vendor]  # the ORM thread's raw path serves this backend


def test_a_busy_timeout_in_the_init_command_never_reaches_the_inline_connection(tmp_path):
    path = tmp_path / "busy.sqlite3"
    init = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=1500"
    opened = _open(str(path), {"init_command": init})
    assert opened is not None
    assert opened.execute("PRAGMA busy_timeout").fetchone()[0] == 0  # a locked flush goes to the ORM's thread at once
    opened.close()
    exclusive = _open(str(path), {"init_command": init + "; PRAGMA locking_mode=EXCLUSIVE"})
    assert exclusive is None


class Rollback(Exception):
    pass


@sqlite_only
@pytest.mark.parametrize("mode", ["IMMEDIATE", None])
def test_an_append_made_for_a_synchronous_caller_joins_its_transaction(mode):
    """Review finding: under DEFERRED, an inline commit escaped a caller's ``atomic`` and outlived its rollback."""
    from asgiref.sync import async_to_sync
    from django.db import transaction

    from helix_django.models import StreamChunk

    manager = DatabaseStreamManager("default", INLINE)
    async_to_sync(manager.claim_stream)("a", "run_a", epoch=1)
    connection.ensure_connection()
    connection.transaction_mode = mode  # None: Django's default (DEFERRED)
    try:
        with pytest.raises(Rollback), transaction.atomic():
            async_to_sync(manager.append)("a", "run_a", [delta(1)])
            raise Rollback
    finally:
        connection.transaction_mode = "IMMEDIATE"
    assert StreamChunk.objects.filter(stream_id="a").count() == 0
    assert manager.group.inline.commits == 0


@sqlite_only
async def test_closing_the_manager_closes_its_inline_connections():
    manager = DatabaseStreamManager("default", INLINE)
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [delta(1)])
    [opened] = manager.group.inline._opened
    await manager.aclose()
    with pytest.raises(sqlite3.ProgrammingError):
        opened.execute("SELECT 1")
    assert await manager.append("s1", "run_a", [delta(2)]) == [2]  # a later flush opens a new one
