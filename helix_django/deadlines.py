"""Deadlines on awaits that never swallow the caller's cancel.

``asyncio.wait_for`` on Python 3.10 and 3.11 returns the awaited result when the caller is
cancelled in the same loop iteration that the awaitable completes: the cancel is lost
(cpython#86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``). A run's task
or a request's task that loses its cancel keeps going after a Stop, a lease loss or a
disconnect, so helix bounds its awaits with a deadline on the caller's own task instead;
that also creates no task for the awaitable (no task per provider event).

Also here: the idle deadline of a provider's stream (:func:`idle_deadline`, one timer
for a whole stream of events), work that must finish whatever happens to its caller
(:func:`completes_despite_cancel`), work its caller waits for however often it is
cancelled meanwhile (:func:`outlasts_cancel`), and the long-lived loops a single cancel must end
(:func:`ends_when_cancelled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:  # pragma: no cover - the backport of asyncio.timeout (same API)
    from async_timeout import timeout as deadline

__all__ = [
    "IdleDeadline",
    "cancel_requested",
    "completes_despite_cancel",
    "deadline",
    "ends_when_cancelled",
    "idle_deadline",
    "outlasts_cancel",
    "within",
]

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


class IdleDeadline:
    """The deadline of :func:`idle_deadline`: :meth:`touch` at each event, one store, no timer moved."""

    __slots__ = ("_handle", "_loop", "_seconds", "_timeout", "last")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: Any, seconds: float) -> None:
        self._loop, self._timeout, self._seconds = loop, timeout, seconds
        self.last = loop.time()
        """Loop time of the last event (or of the start)."""
        self._handle: asyncio.TimerHandle | None = loop.call_at(self.last + seconds, self._check)

    def touch(self) -> None:
        """An event arrived: the idle time counts from now."""
        self.last = self._loop.time()

    def _check(self) -> None:
        due = self.last + self._seconds
        if self._loop.time() < due:
            self._handle = self._loop.call_at(due, self._check)  # events came meanwhile: once per period
            return
        self._handle = None
        self._timeout.reschedule(self._loop.time())  # expires now: the task is cancelled, TimeoutError raised

    def stop(self) -> None:
        """Cancel the timer (the block ended)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


@contextlib.asynccontextmanager
async def idle_deadline(seconds: float) -> AsyncIterator[IdleDeadline]:
    """Raise ``TimeoutError`` in the block once ``seconds`` passed without a :meth:`IdleDeadline.touch`.

    ``asyncio.timeout`` moved at each event cancels a timer and schedules another (two
    heap operations per provider event); this one timer looks at the last
    event's time when it fires and sets itself again for the rest, so a stream of events
    moves it once per period. The expiry is the timeout's own (the task is cancelled,
    ``TimeoutError`` raised on exit), so a cancel from elsewhere is never lost or taken
    for a timeout.
    """
    if sys.version_info < (3, 11):  # pragma: no cover - the backport's timer moves only from its task
        async with deadline(seconds) as timeout:
            yield _MovedPerEvent(asyncio.get_running_loop(), timeout, seconds)  # type: ignore[misc]
        return
    async with deadline(None) as timeout:
        idle = IdleDeadline(asyncio.get_running_loop(), timeout, seconds)
        try:
            yield idle
        finally:
            idle.stop()


class _MovedPerEvent:  # pragma: no cover - Python 3.10 only
    """:class:`IdleDeadline` on Python 3.10: ``async_timeout`` reschedules for the task that
    calls it (a loop callback has none), so its deadline is moved at each event."""

    __slots__ = ("_loop", "_seconds", "_timeout")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: Any, seconds: float) -> None:
        self._loop, self._timeout, self._seconds = loop, timeout, seconds

    def touch(self) -> None:
        self._timeout.update(self._loop.time() + self._seconds)


_despite_cancel: set[asyncio.Task[Any]] = set()
"""Tasks of :func:`completes_despite_cancel` whose caller may be gone (held until they end)."""


async def completes_despite_cancel(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in a task of its own that a cancel of the caller never reaches; return its result.

    For what must finish once begun (a send's run-start commit is always followed by its
    claim). As ``asyncio.shield(asyncio.ensure_future(coro))``, but the caller resumes one
    loop round after ``coro`` ends, not two: the task sets a plain future the caller
    awaits (a cancel of the caller cancels only that future). ``coro``'s exception is
    raised in the caller; once the caller is gone it is logged by the task's end, as a
    shielded task's would be.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[T] = loop.create_future()

    async def run() -> None:
        try:
            value = await coro
        except BaseException as exc:
            if outcome.done():
                raise
            if isinstance(exc, asyncio.CancelledError):
                outcome.cancel()
            else:
                outcome.set_exception(exc)
            return
        if not outcome.done():
            outcome.set_result(value)

    task = loop.create_task(run())
    _despite_cancel.add(task)
    task.add_done_callback(_despite_cancel.discard)
    return await outcome


async def outlasts_cancel(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in a task of its own and wait for it to end, however often the caller is cancelled meanwhile.

    For the endings of a run's task (cancelled, failed, settled after a fence, the
    completion's ``run_finished``): once an ending begins it is the task's answer to any
    cancel, and a further one (a second Stop, a lease loss, an abandon) must not cut it,
    which left the run live with its stream ``active`` and no writer. Unlike
    :func:`completes_despite_cancel`, the caller stays until ``coro`` ended: the task that
    ran the ending reports its outcome. Returns ``coro``'s result or raises its exception
    (``asyncio.CancelledError`` only if ``coro``'s own task was cancelled, as a loop's
    shutdown does). The cancels of the caller that came meanwhile are answered: on Python
    3.11+ its ``cancelling()`` count is back to what it was when this began.
    """
    caller = asyncio.current_task()
    cancelling = getattr(caller, "cancelling", None)
    before = cancelling() if cancelling is not None else 0
    task = asyncio.ensure_future(coro)
    if caller is not None:  # named after the caller (helix-run-<id>): logs tell whose ending it is
        task.set_name(f"{caller.get_name()}:ending")
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            continue  # the ending still decides
    if cancelling is not None:
        while cancelling() > before:
            caller.uncancel()  # type: ignore[union-attr]
    return task.result()


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
    (cpython#86296), and channels_redis's receive then blocks again: a single cancel, the
    only one a loop's shutdown sends, can be lost, and the shutdown then waits forever.

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
