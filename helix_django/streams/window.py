"""The commit window of a stream manager's batched appends: when one event loop's next batch may start.

At a hundred live runs each delta is a flush of its own, woken by its own timer, so a
loop round rarely holds more than two or three of them: committed as they come, nearly
every flush is a transaction (or a round trip) of its own. While a loop's appends come at
``rate`` per second or faster, its batches start at least ``seconds`` apart: an append
made within the window after a batch started waits for the window's end with the appends
other streams make meanwhile. Slower, a window would mostly add its wait to each delta,
so none applies; nor to the first append after a quiet window.

The database manager's group commits (``OPTIONS["COMMIT_WINDOW_MS"]``/``["COMMIT_WINDOW_RATE"]``)
and the Redis manager's pipelined append scripts (the same options) use one per event loop
(docs/performance.md, "The commit window").
"""

from __future__ import annotations

import asyncio
from typing import Any

#: The span over which a loop's append rate is counted, in seconds.
RATE_SPAN_SECONDS = 0.25
#: Defaults of ``OPTIONS["COMMIT_WINDOW_MS"]`` (milliseconds) and ``OPTIONS["COMMIT_WINDOW_RATE"]``
#: (appends per second of one event loop: 40 runs at 50 deltas/s).
COMMIT_WINDOW_MS = 5
COMMIT_WINDOW_RATE = 2000


def window_options(options: dict[str, Any]) -> tuple[float, float]:
    """``(seconds, rate)`` from a manager's ``OPTIONS`` (``COMMIT_WINDOW_MS``, ``COMMIT_WINDOW_RATE``)."""
    return (
        float(options.get("COMMIT_WINDOW_MS", COMMIT_WINDOW_MS)) / 1000,
        float(options.get("COMMIT_WINDOW_RATE", COMMIT_WINDOW_RATE)),
    )


class CommitWindow:
    """One event loop's window: when its last batch started and how fast its appends came lately.

    Times are the loop's clock (``loop.time()``, seconds). ``seconds`` 0 turns the window off.
    """

    __slots__ = ("counted", "counting_since", "rate", "rate_floor", "seconds", "started_at")

    def __init__(self, seconds: float, rate_floor: float) -> None:
        self.seconds = seconds
        self.rate_floor = rate_floor
        self.started_at = float("-inf")
        self.rate = 0.0
        """Appends per second over the last whole RATE_SPAN_SECONDS."""
        self.counted = 0
        self.counting_since = float("-inf")

    def count(self, now: float) -> None:
        """Count one append at ``now``; every RATE_SPAN_SECONDS, :attr:`rate` becomes the last span's rate."""
        self.counted += 1
        elapsed = now - self.counting_since
        if elapsed >= RATE_SPAN_SECONDS:
            self.rate = self.counted / elapsed if elapsed != float("inf") else 0.0
            self.counted, self.counting_since = 0, now

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until the next batch may start (0 or less: at once)."""
        if self.rate < self.rate_floor:
            return 0.0
        return self.started_at + self.seconds - now

    def start(self, now: float) -> None:
        """Record that a batch starts at ``now``."""
        self.started_at = now

    async def next_batch(self, loop: asyncio.AbstractEventLoop, *, opened: bool) -> None:
        """Wait for the window's end, then record that a batch starts (a drain task's loop, per batch).

        ``opened``: this batch is the one whose start opened the drain (its window is already
        recorded): it does not wait. Appends queued while the batch before was in flight so
        join the next window.
        """
        if not opened:
            wait = self.wait(loop.time())
            if wait > 0:
                await asyncio.sleep(wait)
        self.start(loop.time())
