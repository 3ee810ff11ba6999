"""Adversarial tests of the fifth session's changes (one fail-safe timer per reader, ...)."""

from __future__ import annotations

import asyncio

import pytest

from helix_django.models import Run
from helix_django.signals import run_finished
from tests.runtime.conftest import _close_worker_thread_connections, agent, executor, session, use_agents, user_message  # noqa: F401
from tests.streams.helpers import chunk, parked

pytestmark = pytest.mark.django_db(transaction=True)


async def test_close_from_another_task_ends_a_parked_reader(manager):
    """close() cancels the reader's fail-safe timer: it must also end the wait that timer was to wake.

    Nothing is written after the park, so no write wakes the reader. Before the fix the
    parked ``__anext__`` never returned (its only other wake-up was the cancelled timer),
    and a close() landing during the read before a park left that park to the fail-safe.
    """
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    reader.fail_safe_seconds = 3600
    assert (await anext(reader))[0] == 1
    waiting = asyncio.ensure_future(anext(reader))
    await parked(manager, "s1")
    await asyncio.sleep(0.2)  # the task reads the head (redis) and parks
    assert not waiting.done()
    await reader.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 3)
    assert manager.notifier.waiter_count("s1") == 0


ENDINGS = {
    "completed": ({}, None),
    "completed_durable": ({"DURABLE": True, "CACHE_ALIAS": "default"}, None),
    "failed": ({"FAIL_AT_FRACTION": 0.4}, None),
    "interrupted": ({"DROP_AFTER_CHUNKS": 5}, None),
    "cancelled": ({"HANG_AFTER_CHUNKS": 2}, "cancel"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ending", sorted(ENDINGS))
async def test_run_finished_receivers_see_every_field_a_fresh_read_sees(ending, executor, session, use_agents):  # noqa: F811
    """``run_finished`` gets the Run its terminal commit left in memory (no re-read): every
    column, not only those the terminal UPDATE sets, must equal the row as committed."""
    options, action = ENDINGS[ending]
    use_agents(default=agent(options))
    received: list = []

    async def receiver(sender, run, status, **kwargs):
        received.append((status, {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields}))

    run_finished.connect(receiver, dispatch_uid="test-session5-fields")
    try:
        handle = await executor.execute(session, [user_message("What is a checkpoint?")])
        if action == "cancel":
            await asyncio.sleep(0.2)
            await asyncio.wait_for(executor.cancel(session=session, run_id=handle.run_id), 10)
        await executor.wait(handle.run_id, 20)
    finally:
        run_finished.disconnect(dispatch_uid="test-session5-fields")
    fresh = await Run.objects.aget(pk=handle.run_id)
    [(status, seen)] = received
    assert status == fresh.status == ending.split("_")[0]
    assert seen == {f.attname: getattr(fresh, f.attname) for f in Run._meta.concrete_fields}
