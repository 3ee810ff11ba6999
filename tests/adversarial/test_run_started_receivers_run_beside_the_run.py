"""Adversarial tests of the run start: ``run_started`` sent in its own task, the handle's copy of the run.

A run may be cancelled or superseded before its ``run_started`` receivers ran: each
receiver still gets each run once, in start order, the runs end as they should, and
what the handle carries is not changed by the run task.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django.models import Run
from helix_django.signals import run_started
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import (  # noqa: F401 - fixtures
    _close_worker_thread_connections,
    agent,
    executor,
    session,
    use_agents,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
REPLY = " ".join(f"w{i}" for i in range(40))


@pytest.fixture
def gated(executor):  # noqa: F811
    """A run_started receiver that waits for ``gate`` on the runner loop; yields ``(gate, received)``."""
    received: list[tuple[str, str]] = []
    gate = asyncio.Event()

    async def receiver(sender, run, **kwargs):
        await gate.wait()
        received.append((run.id, run.status))

    run_started.connect(receiver, dispatch_uid="test-perf-gated")
    yield gate, received
    run_started.disconnect(dispatch_uid="test-perf-gated")


async def _received(received: list, count: int) -> list:
    for _ in range(250):
        if len(received) >= count:
            return received
        await asyncio.sleep(0.02)
    raise AssertionError(f"{len(received)} of {count} run_started receptions")


async def test_a_run_cancelled_before_its_run_started_receivers_ran(executor, session, use_agents, gated):  # noqa: F811
    gate, received = gated
    use_agents(default=agent({"TEXT": REPLY, "PACE_TPS": 20}))  # live for 2 s: the cancel lands first under load
    handle = await executor.execute(session, [user_message("hi")])
    run = await executor.cancel(session=session, run_id=handle.run_id)
    assert run.status == "cancelled"
    assert await executor.wait(handle.run_id, 10) == "cancelled"
    assert received == []
    executor.runner.loop.call_soon_threadsafe(gate.set)
    assert await _received(received, 1) == [(handle.run_id, "streaming")]
    assert handle.run.status == "streaming"  # the handle's copy, not the run task's object
    info = await get_stream_manager().get_info(session.stream_id)
    assert (info.status, info.end_status) == ("ended", "cancelled")
    snapshot = await abuild_snapshot(session.id)
    assert (snapshot["status"], snapshot["runStatus"]) == ("ended", "cancelled")


async def test_a_run_superseded_before_its_run_started_receivers_ran(executor, session, use_agents, gated):  # noqa: F811
    gate, received = gated
    use_agents(default=agent({"TEXT": REPLY, "PACE_TPS": 20}))  # live for 2 s: the cancel lands first under load
    first_message = user_message("hi")
    first = await executor.execute(session, [first_message])
    second = await executor.regenerate(session=session, supersede_live=True)
    assert await executor.wait(first.run_id, 10) == "superseded"
    executor.runner.loop.call_soon_threadsafe(gate.set)
    assert await executor.wait(second.run_id, 10) == "completed"
    assert await _received(received, 2) == [(first.run_id, "streaming"), (second.run_id, "streaming")]
    assert (await Run.objects.aget(pk=first.run_id)).status == "superseded"  # never set live again by its task
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["runId"] == second.run_id and snapshot["status"] == "ended"
    assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant"]
    assert snapshot["messages"][1]["parts"][-1]["text"] == REPLY
