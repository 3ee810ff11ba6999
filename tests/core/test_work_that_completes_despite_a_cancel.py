"""``completes_despite_cancel``: work that must finish once begun, whatever happens to its caller.

A send's run-start commit is always followed by its claim and its task, even when the
request is cancelled meanwhile (helix_django/transport/chat.py). The caller resumes one
loop round after the work ends; ``asyncio.shield`` of a task, which it replaces, took two
(issue 23: each round before the first byte let a new run's task go first).
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django.deadlines import completes_despite_cancel

pytestmark = pytest.mark.asyncio


class Rounds:
    """Counts the rounds of the running loop (a callback that schedules itself again)."""

    def __init__(self) -> None:
        self.count = 0
        self._stopped = False
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        if not self._stopped:
            self.count += 1
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._stopped = True


async def test_the_result_and_the_exception_of_the_work_reach_the_caller():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def fail() -> None:
        await asyncio.sleep(0)
        raise LookupError("typed")

    assert await completes_despite_cancel(answer()) == 42
    with pytest.raises(LookupError):
        await completes_despite_cancel(fail())


async def test_a_cancelled_caller_leaves_the_work_running_to_its_end():
    started, release, finished = asyncio.Event(), asyncio.Event(), []

    async def commit_then_open() -> str:
        started.set()
        await release.wait()
        finished.append("opened")
        return "handle"

    caller = asyncio.ensure_future(completes_despite_cancel(commit_then_open()))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert finished == ["opened"]


async def test_a_work_cancelled_itself_cancels_its_caller():
    async def cancelled() -> None:
        raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        await completes_despite_cancel(cancelled())


async def test_the_caller_resumes_a_round_sooner_than_behind_a_shield():
    async def instant() -> None:
        return None

    async def rounds_of(wait) -> int:
        rounds = Rounds()
        await wait(instant())
        rounds.stop()
        return rounds.count

    shielded = await rounds_of(lambda coro: asyncio.shield(asyncio.ensure_future(coro)))
    despite = await rounds_of(completes_despite_cancel)
    assert despite == shielded - 1, (despite, shielded)
