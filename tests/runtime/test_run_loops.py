"""Where runs execute (runtime/runner.py): the main thread's loop (an ASGI server's), else the executor's own loop.

A run started on the main thread's loop shares it with the request (no hand-over
between threads before the first byte); a run started from a short-lived loop in
another thread (``async_to_sync``) outlives that loop on the executor's loop thread.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.runtime.conftest import agent, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_a_run_started_on_the_main_threads_loop_executes_on_it(executor, session, use_agents):
    use_agents(default=agent({"TEXT": "one two three", "PACE_TPS": 200}))
    assert threading.current_thread() is threading.main_thread()  # pytest-asyncio's loop, like daphne's
    handle = await executor.execute(session, [user_message("hi")])
    entry = executor.runs._entries[handle.run_id]
    assert entry.event_loop is asyncio.get_running_loop()
    assert entry.task.get_loop() is asyncio.get_running_loop()
    assert executor.runner._thread is None  # the executor's own loop thread was never started
    assert await executor.wait(handle.run_id, 10) == "completed"


async def test_a_run_started_from_a_short_lived_loop_in_another_thread_outlives_it(executor, session, use_agents):
    use_agents(default=agent({"TEXT": "one two three four five six", "PACE_TPS": 40}))
    started = {}

    def admin_view():  # async_to_sync in a sync view: a loop of its own, closed when the call returns
        async def send():
            handle = await executor.execute(session, [user_message("hi")])
            started["run_id"], started["loop"] = handle.run_id, asyncio.get_running_loop()

        asyncio.run(send())

    await asyncio.to_thread(admin_view)
    assert started["loop"].is_closed()
    entry = executor.runs._entries[started["run_id"]]
    assert entry.event_loop is executor.runner.loop and entry.event_loop is not started["loop"]
    assert await executor.wait(started["run_id"], 10) == "completed"


async def test_a_cancelled_caller_still_completes_the_runs_start(executor, session, use_agents):
    use_agents(default=agent({"TEXT": "one two", "PACE_TPS": 100}))
    caller = asyncio.ensure_future(executor.execute(session, [user_message("hi")]))
    await asyncio.sleep(0)  # the start is under way (its own task)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    for _ in range(200):
        if executor.runs._entries or executor.runs._recent:
            break
        await asyncio.sleep(0.01)
    (run_id,) = [*executor.runs._entries, *executor.runs._recent]
    assert await executor.wait(run_id, 10) == "completed"


async def test_close_abandons_the_runs_on_the_main_threads_loop(executor, session, use_agents):
    use_agents(default=agent({"TEXT": " ".join(["word"] * 200), "PACE_TPS": 20}))
    handle = await executor.execute(session, [user_message("hi")])
    executor.close()
    assert await executor.wait(handle.run_id, 10) == "abandoned"


async def test_an_ended_run_keeps_only_its_outcome_for_wait(executor, session, use_agents):
    import gc
    import weakref

    use_agents(default=agent({"TEXT": "one two three", "PACE_TPS": 200}))
    handle = await executor.execute(session, [user_message("hi")])
    run_loop = weakref.ref(executor.runs._entries[handle.run_id].loop)
    assert await executor.wait(handle.run_id, 10) == "completed"
    gc.collect()
    assert run_loop() is None  # its message, writer and agent are not kept by the recent-runs memory
    assert await executor.wait(handle.run_id, 1) == "completed"
