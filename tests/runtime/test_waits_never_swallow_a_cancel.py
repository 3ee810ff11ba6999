"""A caller cancelled while the thing it waits for completes is cancelled, never handed the result.

``asyncio.wait_for`` on Python 3.10 and 3.11 returns the awaited result when the cancel of
its caller lands in the loop iteration in which the awaitable completes (cpython#86296):
the cancel is lost and a request's or a run's task goes on after a disconnect, a Stop or a
lease loss. Every bounded await in helix goes through :func:`helix_django.deadlines.within`,
a deadline on the caller's own task; these tests make the cancel and the completion meet in
one iteration at each of them (they fail with ``wait_for`` on 3.10 and 3.11).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from types import SimpleNamespace

import pytest

from helix_django.deadlines import within
from helix_django.recovery.provider import aquery_operation
from helix_django.runtime.local_runs import LocalRuns


async def _cancelled_as_it_completes(make_wait, complete, *, relays: int = 0) -> BaseException | object:
    """Start ``make_wait()`` as a task, complete what it waits for and cancel it in the same iteration.

    ``relays``: loop iterations between the completion and the cancel, for a result passed
    on through that many futures (a shield's outer future is one more) before it reaches the wait.
    """
    task = asyncio.ensure_future(make_wait())
    for _ in range(3):
        await asyncio.sleep(0)  # the task is parked on its wait
    complete()
    for _ in range(relays):
        await asyncio.sleep(0)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError as exc:
        return exc


async def test_within_keeps_a_cancel_that_meets_the_result():
    future = asyncio.get_running_loop().create_future()
    outcome = await _cancelled_as_it_completes(lambda: within(future, 5), lambda: future.set_result("done"))
    assert isinstance(outcome, asyncio.CancelledError), outcome


async def test_within_times_out_and_cancels_the_awaitable():
    gate = asyncio.Event()
    waiting = asyncio.ensure_future(gate.wait())
    with pytest.raises(asyncio.TimeoutError):
        await within(waiting, 0.01)
    assert waiting.cancelled()
    assert await within(asyncio.sleep(0, "value"), None) == "value"


def _entries(done: concurrent.futures.Future) -> LocalRuns:
    entries = LocalRuns("helix-runs-test")
    entries._entries = {"run-1": SimpleNamespace(done=done, claimed=done)}
    entries._recent = {}
    return entries


async def test_waiting_for_a_run_keeps_a_cancel_that_meets_the_runs_end():
    done: concurrent.futures.Future = concurrent.futures.Future()
    entries = _entries(done)
    outcome = await _cancelled_as_it_completes(lambda: entries.wait("run-1", 5), lambda: done.set_result("completed"))
    assert isinstance(outcome, asyncio.CancelledError), outcome


async def test_waiting_for_a_claim_keeps_a_cancel_that_meets_the_claim():
    claimed: concurrent.futures.Future = concurrent.futures.Future()
    entries = _entries(claimed)
    outcome = await _cancelled_as_it_completes(
        lambda: entries.wait_claimed("run-1"), lambda: claimed.set_result(None), relays=1
    )
    assert isinstance(outcome, asyncio.CancelledError), outcome


async def test_a_status_query_keeps_a_cancel_that_meets_the_providers_answer():
    answer = asyncio.get_running_loop().create_future()

    class Provider:
        supports_retrieve = True

        async def retrieve(self, operation_id):
            return await answer

    run = SimpleNamespace(id="run-1", provider_operation_id="op-1")
    outcome = await _cancelled_as_it_completes(
        lambda: aquery_operation(run, provider=Provider()), lambda: answer.set_result({"status": "completed"})
    )
    assert isinstance(outcome, asyncio.CancelledError), outcome
