"""A Stop that reaches a run's task while the task writes its ending never leaves the run half-ended.

``executor.cancel()`` cancels the run's task for every Stop it accepts while the run is
live, and a run stays live until its ending's terminal commit. A second Stop (a double
click, the chat page's Stop then the admin's) that landed while the first one's cancelled
ending was being written cancelled that ending: the run's task ended "abandoned", the run
stayed ``streaming`` with its stream ``active`` and no writer, until its lease expired.
The same held for a Stop landing while a failed run's ending was written. Found by a
review of the fourteenth session.

Each ending is held at its terminal commit (on the run's loop) until the further Stop
has cancelled the run's task; then it goes on.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django import store
from helix_django.deadlines import outlasts_cancel
from helix_django.models import Run, RunStatus
from helix_django.runtime import cancels
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, run_chunks, stream_chunks, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


class HeldEnding:
    """Holds the run's terminal commit until the test lets it go; counts the run task's cancels."""

    def __init__(self, monkeypatch) -> None:
        self.entered = asyncio.Event()
        self.released = asyncio.Event()
        self.stops = 0
        self.stopped = asyncio.Event()
        commit, stop = store.acommit_terminal, cancels.stop_started_task

        async def held_commit(*args, **kwargs):
            self.entered.set()
            await self.released.wait()
            return await commit(*args, **kwargs)

        def counted_stop(entry) -> None:
            stop(entry)
            self.stops += 1
            self.stopped.set()

        monkeypatch.setattr(store, "acommit_terminal", held_commit)
        monkeypatch.setattr(cancels, "stop_started_task", counted_stop)

    async def stop_meanwhile(self, executor, session, run_id: str) -> Run:
        """Once the ending waits at its commit: a Stop that cancels the run's task; then the ending goes on."""
        await asyncio.wait_for(self.entered.wait(), 20)
        self.stopped.clear()
        stop = asyncio.ensure_future(executor.cancel(session=session, run_id=run_id))
        await asyncio.wait_for(self.stopped.wait(), 20)
        for _ in range(5):  # the cancel lands in the run's task
            await asyncio.sleep(0)
        self.released.set()
        return await asyncio.wait_for(stop, 20)


async def assert_ended(executor, session, run_id: str, status: str, stream_status: str) -> None:
    assert await executor.wait(run_id, 20) == status
    run = await Run.objects.aget(pk=run_id)
    assert run.status == status
    info = await get_stream_manager().get_info(session.stream_id)
    assert (info.status, info.run_id) == (stream_status, run_id)
    ends = [c for c in run_chunks(await stream_chunks(session.stream_id), run_id) if c["type"] == "helix-run-end"]
    assert [c["status"] for c in ends] == [status]


async def test_a_second_stop_during_the_cancelled_ending_ends_the_run_cancelled(
    executor, session, use_agents, monkeypatch
):
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(400)), "PACE_TPS": 40}))
    held = HeldEnding(monkeypatch)
    handle = await executor.execute(session, [user_message("stop me twice")])
    first = asyncio.ensure_future(executor.cancel(session=session, run_id=handle.run_id))
    second = await held.stop_meanwhile(executor, session, handle.run_id)
    assert (await asyncio.wait_for(first, 20)).status == RunStatus.CANCELLED
    assert held.stops == 2  # both Stops cancelled the run's task
    assert second.status == RunStatus.CANCELLED
    await assert_ended(executor, session, handle.run_id, RunStatus.CANCELLED, "ended")


async def test_a_stop_during_the_failed_ending_leaves_the_run_failed(executor, session, use_agents, monkeypatch):
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(40)), "FAIL_AFTER_CHUNKS": 5}))
    held = HeldEnding(monkeypatch)
    handle = await executor.execute(session, [user_message("fail, then stop")])
    stopped = await held.stop_meanwhile(executor, session, handle.run_id)
    assert held.stops == 1
    assert stopped.status == RunStatus.FAILED
    await assert_ended(executor, session, handle.run_id, RunStatus.FAILED, "failed")


async def test_outlasts_cancel_waits_for_its_work_through_every_cancel_and_answers_them():
    released = asyncio.Event()

    async def ending() -> str:
        await released.wait()
        return "ended"

    async def task_body() -> tuple[str, int]:
        try:
            raise asyncio.CancelledError  # the first Stop, being answered
        except asyncio.CancelledError:
            status = await outlasts_cancel(ending())
        return status, asyncio.current_task().cancelling()

    task = asyncio.ensure_future(task_body())
    for _ in range(3):  # further Stops while the ending runs
        await asyncio.sleep(0)
        task.cancel()
    await asyncio.sleep(0)
    assert not task.done()
    released.set()
    assert await task == ("ended", 0)
