"""A provider's events are read under one idle deadline: no asyncio task per event (issue 23).

``asyncio.wait_for`` around each event made a task per event on Python 3.11 (about
19 us of CPU each, several trips round the event loop) and could lose a cancel that
landed as the event arrived. The attempt's idle timeout is one deadline moved at each
event (``asyncio.timeout``); an idle provider still ends the attempt as a dropped stream
(tests/runtime/test_failures.py).
"""

from __future__ import annotations

import asyncio

import pytest

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
