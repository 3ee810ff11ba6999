"""Loop rounds between a lone flush and its reader's wake-up: a design invariant, counted, never timed (issue 23).

At 10 live streams each delta is a flush of its own, and every trip round the event
loop (a selector call, a callback or a task step) costs more CPU than the delta's framing.
A flush made while nothing else is ready on the loop can gain nothing from waiting a
round for company, so between ``append_soon`` and the notify that wakes a reader at the
head the stream manager schedules:

- memory: no callback and no task (the write never waits);
- database on SQLite (``INLINE_WRITES``): no callback and no task (committed inline at once);
- database on PostgreSQL: a ``call_soon`` round, then one task (the ORM thread's drain), as before;
- Redis: one task (the script's round trip; redis-py's own are not counted).

Appends made by several callbacks of one round still share one group commit (the
500-stream target of docs/performance.md rests on it). The window is counted by
wrapping the running loop's ``call_soon``/``create_task`` (instance attributes, as
``tests/transport/test_thread_hops_per_send_and_delta.py`` wraps ``run_in_executor``):
asyncio's futures and tasks schedule through them.
"""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

from helix_django.streams.reader import ResumableReader

pytestmark = pytest.mark.django_db(transaction=True)
#: Callbacks and tasks the manager schedules between a lone flush and its notify, per backend.
EXPECTED = {
    "memory": [],
    "database": [] if connection.vendor == "sqlite" else ["AppendQueue._drain_now", "task AppendQueue._drain"],
    "redis": ["task RedisStreamManager.append"],
}


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"c{n} "}


class RoundCounter:
    """Callbacks and tasks of helix's own code (by qualified name) scheduled on ``loop`` while ``open``.

    A library's own (redis-py's connection tasks, asyncio's future callbacks) are left out.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.scheduled: list[str] = []
        self.open = False
        self._call_soon, self._create_task = loop.call_soon, loop.create_task

    def __enter__(self) -> RoundCounter:
        def call_soon(callback, *args, **kwargs):
            module = getattr(callback, "__module__", "") or ""
            if self.open and module.startswith("helix_django"):
                self.scheduled.append(callback.__qualname__)
            return self._call_soon(callback, *args, **kwargs)

        def create_task(coro, **kwargs):
            frame = getattr(coro, "cr_frame", None)
            if self.open and frame is not None and frame.f_globals.get("__name__", "").startswith("helix_django"):
                self.scheduled.append(f"task {coro.__qualname__}")
            return self._create_task(coro, **kwargs)

        self.loop.call_soon, self.loop.create_task = call_soon, create_task
        return self

    def __exit__(self, *exc) -> None:
        del self.loop.call_soon, self.loop.create_task


async def _reader_at_head(manager, stream_id: str) -> tuple[asyncio.Task, list[int]]:
    """A task reading ``stream_id`` from its head, parked once this returns; it records the sequences."""
    got: list[int] = []
    info = await manager.get_info(stream_id)
    reader = ResumableReader(manager, stream_id, from_sequence=info.head_sequence, wait_for_live=False, info=info)

    async def read() -> None:
        async for sequence, _chunk in reader:
            got.append(sequence)

    task = asyncio.get_running_loop().create_task(read())
    for _ in range(200):
        await asyncio.sleep(0.005)
        if manager.notifier.waiter_count(stream_id):
            return task, got
    raise AssertionError("the reader never parked")


async def test_a_lone_flush_wakes_its_reader_without_a_loop_round_of_its_own(manager, backend_name):
    stream_id = f"rounds_{backend_name}"
    await manager.claim_stream(stream_id, "run_a", epoch=1)
    assert await manager.append(stream_id, "run_a", [delta(1)]) == [1]
    task, got = await _reader_at_head(manager, stream_id)
    loop = asyncio.get_running_loop()
    notified = loop.create_future()
    notify = manager.notifier.notify

    def notify_once(sid, **kwargs):
        notify(sid, **kwargs)
        if sid == stream_id and not notified.done():
            counter.open = False  # what the manager scheduled up to the wake-up: the window closes
            notified.set_result(None)

    manager.notifier.notify = notify_once
    try:
        with RoundCounter(loop) as counter:
            await asyncio.sleep(0.01)  # woken by a timer, as a provider's delta is: nothing else is ready
            counter.open = True
            appended = manager.append_soon(stream_id, "run_a", [delta(2)])
            await asyncio.wait_for(notified, 10)
            assert await appended == [2]
        await manager.end_stream(stream_id, "run_a")
        await asyncio.wait_for(task, 10)
    finally:
        del manager.notifier.notify
    assert counter.scheduled == EXPECTED[backend_name], counter.scheduled
    assert got == [2]  # delivered once, after its commit


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the inline group commit is SQLite's")
async def test_appends_of_one_loop_round_still_share_one_group_commit():
    from helix_django.streams.database import DatabaseStreamManager

    manager = DatabaseStreamManager("default", {"INLINE_WRITES": True})
    streams = [f"round_{n}" for n in range(5)]
    for stream_id in streams:
        await manager.claim_stream(stream_id, "run_a", epoch=1)
    before = manager.group.inline.commits
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future] = []
    for stream_id in streams:  # five callbacks of the next round, each one stream's flush
        loop.call_soon(lambda sid=stream_id: futures.append(manager.append_soon(sid, "run_a", [delta(1)])))
    await asyncio.sleep(0)
    while len(futures) < len(streams):
        await asyncio.sleep(0)
    assert [await future for future in futures] == [[1]] * len(streams)
    assert manager.group.inline.commits - before == 1
    await manager.aclose()
