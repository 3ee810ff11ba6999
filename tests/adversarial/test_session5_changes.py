"""Adversarial tests of the fifth session's changes (one fail-safe timer per reader, ...)."""

from __future__ import annotations

import asyncio

import pytest

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
