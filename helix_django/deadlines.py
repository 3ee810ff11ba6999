"""Deadlines on awaits that never swallow the caller's cancel.

``asyncio.wait_for`` on Python 3.10 and 3.11 returns the awaited result when the caller is
cancelled in the same loop iteration that the awaitable completes: the cancel is lost
(cpython#86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``). A run's task
or a request's task that loses its cancel keeps going after a Stop, a lease loss or a
disconnect, so helix bounds its awaits with a deadline on the caller's own task instead;
that also creates no task for the awaitable (issue 23: no task per provider event).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:  # pragma: no cover - the backport of asyncio.timeout (same API)
    from async_timeout import timeout as deadline

__all__ = ["cancel_requested", "deadline", "ends_when_cancelled", "within"]

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """Await ``awaitable`` for at most ``seconds`` (``None``: no bound) and return its result.

    Raises ``asyncio.TimeoutError`` (``TimeoutError`` on 3.11+) when the time runs out, the
    awaitable being cancelled first, and ``asyncio.CancelledError`` whenever the caller is
    cancelled, even as the awaitable completes (cpython#86296). Wrap a future in
    ``asyncio.shield`` to keep it running past the deadline.
    """
    async with deadline(seconds):
        return await awaitable


def cancel_requested() -> bool:
    """Whether the current task has a cancel pending (Python 3.11+; always False on 3.10).

    A loop that outlives its errors (a listener, a periodic scan) checks it when a library
    turned the cancel that reached it into an error of its own (channels_redis and redis-py
    can raise ConnectionError for a read cut by a cancel): re-raising then lets the task end,
    where retrying kept it alive and a loop's shutdown waited on it forever.
    """
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling and cancelling())


async def ends_when_cancelled(
    work: Callable[[], Coroutine[Any, Any, T]], *, interval: float = 0.05, attempts: int = 200
) -> T:
    """Run ``work()`` in a task of its own and return its result; a cancel of the caller always ends it.

    For the long-lived loops around a library's blocking calls (the channel-layer listener,
    the Redis notify subscription, the periodic relaunch scan). redis-py 8 sends every
    command through ``asyncio.wait_for`` once a socket timeout is set, and its default is
    5 s: on Python 3.10 and 3.11 a cancel that meets that send completing is dropped
    (cpython#86296), and channels_redis's receive then blocks again, so a single cancel,
    the only one a loop's shutdown sends, was lost and the shutdown waited forever (the
    tasks-executor test's 300 s teardown, seen in the twelfth session).

    When the caller is cancelled the child is cancelled again every ``interval`` seconds
    until it ends, at most ``attempts`` times, then ``asyncio.CancelledError`` is raised.
    The child's own exceptions and result pass through unchanged. ``work`` is called when
    this coroutine first runs, so a task that never ran leaves no coroutine that was never
    awaited. One task per call: not for a per-delta path.
    """
    task = asyncio.ensure_future(work())
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        for _ in range(attempts):
            if task.done():
                break
            task.cancel()
            await asyncio.wait({task}, timeout=interval)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the caller's cancel is what is reported
        raise
