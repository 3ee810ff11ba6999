"""A burst of provider events never holds the event loop (issue 20 "no request makes others wait", issue 23).

A model that answers faster than the network (or one network read carrying many events)
hands the run its events without suspending. The run gives the loop back after each
event, so other requests, and the response's own first byte, go between its deltas.
Counted, never timed: a task beside the run sees the answer grow event by event.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.runtime.conftest import agent, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
TOKENS = 300


async def test_a_task_beside_a_pace_0_run_sees_its_answer_grow_event_by_event(executor, session, use_agents):
    use_agents(default=agent({"TEXT": " ".join(f"w{i}" for i in range(TOKENS))}))  # pace 0: one burst
    handle = await executor.execute(session, [user_message("hi")])
    entry = executor.runs._entries[handle.run_id]
    run_loop = entry.loop
    assert run_loop is not None and entry.event_loop is asyncio.get_running_loop()
    seen: set[int] = set()
    while not entry.done.done():
        seen.add(sum(len(part.get("text", "")) for part in run_loop.acc.parts))
        await asyncio.sleep(0)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert len(seen) >= TOKENS // 2, len(seen)  # held, the loop would show it a few times only
