"""A Stop that lands while a run's completion transaction runs (issue 23, review of the one-hop completion).

The Stop of another request (its own ORM thread: Django's ASGI handler gives each request
one) commits ``cancel_requested_at`` and then cancels the run's task. When the cancel lands
while the completion's transaction is on the ORM's thread, that transaction still commits:
the run is ``completed`` and its stream ended. The run must then end as completed (readers
told, ``run_finished`` sent), not fail its ending against the stream it just ended.

PostgreSQL only: the completion is held at its ``finish`` insert by an advisory lock the
test holds (a trigger waits for it), so the cancel lands inside the hop every time.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections

from helix_django.models import Run, StreamChunk
from helix_django.signals import run_finished
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, run_chunks, stream_chunks, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
LOCK = 872_301


@contextlib.contextmanager
def inserts_wait_for_the_test_lock(chunk_type: str):
    """A trigger: inserting a chunk of ``chunk_type`` waits for advisory lock LOCK (held by the test)."""
    table = StreamChunk._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION helix_test_hold() RETURNS trigger AS $$ "
            f"BEGIN PERFORM pg_advisory_xact_lock({LOCK}); RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            f"CREATE TRIGGER helix_test_hold BEFORE INSERT ON {table} FOR EACH ROW "
            "WHEN (NEW.type = %s) EXECUTE FUNCTION helix_test_hold()",
            [chunk_type],
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER IF EXISTS helix_test_hold ON {table}")
            cursor.execute("DROP FUNCTION IF EXISTS helix_test_hold()")


class LockHolder(threading.Thread):
    """Holds advisory lock LOCK on a connection of its own until :meth:`release`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.held = threading.Event()
        self._release = threading.Event()

    def run(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK])
                self.held.set()
                self._release.wait(30)
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK])
        finally:
            connection.close()

    def release(self) -> None:
        self._release.set()
        self.join(10)


def _someone_waits_for_the_lock() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted", [LOCK]
            )
            return cursor.fetchone()[0] > 0
    finally:
        connection.close()


@pytest.fixture
def postgresql_only():
    if connections["default"].vendor != "postgresql":
        pytest.skip("holds the completion with a PostgreSQL advisory lock")


async def test_a_stop_landing_during_the_completion_hop_leaves_the_run_completed_and_told(
    postgresql_only, executor, session, use_agents
):
    use_agents(default=agent())
    finished: list[str] = []

    async def on_finished(sender, run, status, **kwargs):
        finished.append(status)

    run_finished.connect(on_finished, dispatch_uid="test_stop_during_completion")
    holding = inserts_wait_for_the_test_lock("finish")
    await sync_to_async(holding.__enter__)()
    holder = LockHolder()
    holder.start()
    assert await asyncio.to_thread(holder.held.wait, 10)
    try:
        handle = await executor.execute(session, [user_message("Stop me at the very end")])
        for _ in range(400):  # the completion's transaction waits at its finish insert
            if await asyncio.to_thread(_someone_waits_for_the_lock):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the completion never reached its finish insert")
        # What the executor's cancel does once its (fenced) cancel request committed.
        entry = executor.runs._entries[handle.run_id]
        entry.loop.is_cancel_requested = True
        entry.event_loop.call_soon_threadsafe(entry.task.cancel)
        await asyncio.sleep(0.1)
        holder.release()
        status = await executor.wait(handle.run_id, 10)
    finally:
        holder.release()
        run_finished.disconnect(dispatch_uid="test_stop_during_completion")
        await sync_to_async(holding.__exit__)(None, None, None)
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed"
    assert status == "completed"
    assert finished == ["completed"]
    kinds = [chunk["type"] for chunk in run_chunks(await stream_chunks(session.id), handle.run_id)]
    assert kinds.count("finish") == 1 and kinds.count("finish-step") == 1
    assert kinds[-4:] == ["finish-step", "finish", "helix-step-committed", "helix-run-end"]
    info = await get_stream_manager().get_info(session.stream_id)
    assert (info.status, info.end_status) == ("ended", "completed")


async def test_a_stop_landing_while_the_completion_waits_for_a_flush_stores_no_finish(
    postgresql_only, executor, session, use_agents
):
    """The completion hands over its chunks once the flush in flight is stored; cancelled there, no ``finish``."""
    use_agents(default=agent({"PACE_TPS": 200}))
    holding = inserts_wait_for_the_test_lock("text-delta")
    await sync_to_async(holding.__enter__)()
    holder = LockHolder()
    holder.start()
    assert await asyncio.to_thread(holder.held.wait, 10)
    try:
        handle = await executor.execute(session, [user_message("Stop me while my last flush waits")])
        entry = executor.runs._entries[handle.run_id]
        for _ in range(400):  # the answer streamed to its end; the completion waits for the held flush
            if entry.loop.is_ending and await asyncio.to_thread(_someone_waits_for_the_lock):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the completion never waited for the held flush")
        entry.loop.is_cancel_requested = True
        entry.event_loop.call_soon_threadsafe(entry.task.cancel)
        await asyncio.sleep(0.1)
        holder.release()
        status = await executor.wait(handle.run_id, 10)
    finally:
        holder.release()
        await sync_to_async(holding.__exit__)(None, None, None)
    assert status == "cancelled"
    assert (await Run.objects.aget(pk=handle.run_id)).status == "cancelled"
    kinds = [chunk["type"] for chunk in run_chunks(await stream_chunks(session.id), handle.run_id)]
    assert "finish" not in kinds
    assert kinds[-3:] == ["finish-step", "message-metadata", "helix-run-end"]
