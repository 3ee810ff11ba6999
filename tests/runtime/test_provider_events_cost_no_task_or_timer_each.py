"""A provider's events are read under one idle deadline: no asyncio task and no timer per event (issue 23).

``asyncio.wait_for`` around each event made a task per event on Python 3.11 (about
19 us of CPU each, several trips round the event loop) and could lose a cancel that
landed as the event arrived. ``asyncio.timeout`` moved at each event cancelled a timer
and scheduled another. The attempt's idle timeout is one timer that reads the last
event's time when it fires (:func:`helix_django.deadlines.idle_deadline`); an idle
provider still ends the attempt as a dropped stream (tests/runtime/test_failures.py).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from helix_django.deadlines import idle_deadline
from tests.runtime.conftest import agent, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
TOKENS = 200


async def test_a_run_of_200_provider_events_creates_a_handful_of_tasks(executor, session, use_agents):
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(TOKENS))}))
    created: list[str] = []
    loops = {asyncio.get_running_loop(), executor.runner.loop}  # where the run's task lives: either

    def counting_factory(loop, coro, **kwargs):
        created.append(getattr(coro, "__qualname__", repr(coro)))
        return asyncio.Task(coro, loop=loop, **kwargs)

    for loop in loops:
        loop.set_task_factory(counting_factory)
    try:
        handle = await executor.execute(session, [user_message("hi")])
        assert await executor.wait(handle.run_id, 10) == "completed"
    finally:
        for loop in loops:
            loop.set_task_factory(None)
    assert len(created) < 20, created  # the run's own, its lease renewer, its flushes: not one per event


async def test_a_run_of_200_provider_events_schedules_a_handful_of_timers(executor, session, use_agents):
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(TOKENS))}))  # PACE_TPS 0: no sleep
    counted: list[int] = []
    loops = {asyncio.get_running_loop(), executor.runner.loop}
    originals = {loop: loop.call_at for loop in loops}

    def counting(original):
        def call_at(when, callback, *args, **kwargs):
            counted.append(1)
            return original(when, callback, *args, **kwargs)

        return call_at

    for loop in loops:
        loop.call_at = counting(originals[loop])
    try:
        handle = await executor.execute(session, [user_message("hi")])
        assert await executor.wait(handle.run_id, 10) == "completed"
    finally:
        for loop in loops:
            del loop.call_at
    assert len(counted) < 40, len(counted)  # flush timers, the lease, the wait: not one per event


class TimerCounter:
    """Counts the timers scheduled on the running loop while installed."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.scheduled = 0

    def __enter__(self) -> TimerCounter:
        original = self.loop.call_at

        def call_at(when, callback, *args, **kwargs):
            self.scheduled += 1
            return original(when, callback, *args, **kwargs)

        self.loop.call_at = call_at
        return self

    def __exit__(self, *exc) -> None:
        del self.loop.call_at


@pytest.mark.asyncio
async def test_events_touching_an_idle_deadline_move_no_timer_each():
    with TimerCounter() as timers:
        async with idle_deadline(0.05) as deadline:
            for _ in range(2000):  # 2 000 events within a tenth of the idle time: no sleep, no timer
                deadline.touch()
    assert timers.scheduled == 1, timers.scheduled


@pytest.mark.asyncio
async def test_an_idle_deadline_touched_in_time_never_expires_and_sets_its_timer_once_per_period():
    started = time.monotonic()
    with TimerCounter() as timers:
        async with idle_deadline(0.1) as deadline:
            while time.monotonic() - started < 0.35:
                await asyncio.sleep(0.01)
                deadline.touch()
    sleeps = 35  # each sleep schedules its own timer
    assert timers.scheduled <= sleeps + 8, timers.scheduled  # the deadline's: about one per 0.1 s


@pytest.mark.asyncio
async def test_an_idle_deadline_expires_after_its_seconds_without_an_event():
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with idle_deadline(0.05) as deadline:
            await asyncio.sleep(0.03)
            deadline.touch()
            await asyncio.sleep(10)
    assert 0.07 <= time.monotonic() - started < 2


@pytest.mark.asyncio
async def test_a_cancel_inside_an_idle_deadline_stays_a_cancel():
    async def body():
        async with idle_deadline(0.05):
            await asyncio.sleep(10)

    task = asyncio.ensure_future(body())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.08)  # the deadline's timer was stopped: nothing fires on a finished task
