"""In-process wake-ups for stream readers, with an optional cross-process hook.

A reader subscribes *before* it reads, then awaits the waiter only if the read found
nothing new, so a write that lands between the read and the wait is never missed.
Waiters may live on any event loop; :meth:`StreamNotifier.notify` is thread-safe.

Cross-process wake-ups (several ASGI processes sharing one database) go through the
Channels layer: see :mod:`helix_django.streams.broadcast`.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any


class Waiter:
    """A one-shot wake-up for one stream, bound to the event loop that created it."""

    __slots__ = ("_future", "_loop", "_notifier", "_released", "stream_id")

    def __init__(self, notifier: StreamNotifier, stream_id: str) -> None:
        self._notifier = notifier
        self.stream_id = stream_id
        self._loop = asyncio.get_running_loop()
        # A bare future, not an Event awaited through wait_for: wait_for costs a task per
        # wait, and a parked reader waits once per chunk batch (docs/performance.md).
        self._future: asyncio.Future[bool] = self._loop.create_future()
        self._released = False

    def _fire(self) -> None:
        if self._loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._resolve(True)
        else:
            self._loop.call_soon_threadsafe(self._resolve, True)

    def _resolve(self, value: bool) -> None:
        if not self._future.done():
            self._future.set_result(value)

    def expire(self) -> None:
        """End a pending :meth:`wait` as timed out (it returns False); no-op once woken."""
        self._resolve(False)

    @property
    def is_fired(self) -> bool:
        """Whether a write or status change was signalled since subscription."""
        future = self._future
        return future.done() and not future.cancelled() and future.result()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until notified; return False on ``timeout`` (seconds). Unsubscribes either way."""
        timer = None if timeout is None else self._loop.call_later(timeout, self._resolve, False)
        try:
            return await self._future
        finally:
            if timer is not None:
                timer.cancel()
            self.cancel()

    def cancel(self) -> None:
        """Stop listening (idempotent: the cross-process listen count drops once per waiter)."""
        if self._released:
            return
        self._released = True
        self._notifier._discard(self)


class StreamNotifier:
    """Registry of waiters by stream id; one per stream manager instance."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)
        self.remote: Any = None
        """Optional cross-process broadcaster with ``publish(stream_id)``/``listen(stream_id)``."""

    def subscribe(self, stream_id: str) -> Waiter:
        """Return a waiter fired by the next :meth:`notify` of ``stream_id``. Needs a running loop."""
        waiter = Waiter(self, stream_id)
        with self._lock:
            self._waiters[stream_id].add(waiter)
        if self.remote is not None:
            self.remote.listen(stream_id)
        return waiter

    def notify(self, stream_id: str, *, local_only: bool = False) -> None:
        """Wake every waiter of ``stream_id`` in this process (and others, unless ``local_only``)."""
        with self._lock:
            waiters = self._waiters.pop(stream_id, ())
        for waiter in waiters:
            waiter._fire()
        if self.remote is not None and not local_only:
            self.remote.publish(stream_id)

    def _discard(self, waiter: Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(waiter.stream_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    self._waiters.pop(waiter.stream_id, None)
        if self.remote is not None:
            self.remote.unlisten(waiter.stream_id)

    def waiter_count(self, stream_id: str) -> int:
        """Return how many waiters are parked on ``stream_id`` (for tests and metrics)."""
        with self._lock:
            return len(self._waiters.get(stream_id, ()))
