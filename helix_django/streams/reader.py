"""A resumable reader of one stream: from a cursor to the terminal, waking on writes (002, "Resumable streams").

Built by :meth:`~helix_django.streams.base.BaseStreamManager.create_resumable_reader`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from helix_django.streams.info import ACTIVE, TERMINAL_STREAM_STATUSES, ReadableStreams, StoredChunk, StreamInfo

Manager = TypeVar("Manager", bound=ReadableStreams)


class ResumableReader(Generic[Manager]):
    """Async iterator of ``(sequence, chunk)`` over one stream, from a cursor to the terminal.

    Attributes (002, "The backlog boundary"):

    - ``current_sequence``: the last sequence yielded (the cursor);
    - ``catch_up_head``: the head captured atomically with the initial history read;
    - ``caught_up``: an :class:`asyncio.Event` set once every backlog chunk up to
      ``catch_up_head`` was yielded, or when the reader ends or is closed.

    Ends after a stream goes ``ended``/``paused``/``failed`` and every chunk was yielded.
    Readers wake on writes (the manager's notifier), never on a polling timer; a long
    fail-safe timeout only guards against a lost cross-process wake-up.
    """

    fail_safe_seconds: float = 30.0

    def __init__(
        self,
        manager: Manager,
        stream_id: str,
        *,
        from_sequence: int,
        wait_for_live: bool,
        info: StreamInfo | None,
        subscribed: Any = None,
        chunks: Sequence[StoredChunk] = (),
    ) -> None:
        """``subscribed``: a waiter subscribed before the caller's read that returned ``info``
        and ``chunks`` (its chunks after ``from_sequence``, yielded first). When that read
        reached the head the reader keeps the waiter, so its first wait needs no read of its
        own unless the waiter fired: the caller's read stands in for it."""
        self.manager = manager
        self.stream_id = stream_id
        self.current_sequence = from_sequence
        self.catch_up_head: int | None = None
        self._caught_up: asyncio.Event | None = None
        self._is_caught_up = False
        self._buffer: Sequence[StoredChunk] = ()
        """The last read's chunks (its own list, not a copy), yielded from ``_next`` on."""
        self._next = 0
        self._waiting_for_live = wait_for_live
        self._run_at_open = info.run_id if info else None
        self._epoch_at_open = info.epoch if info else -1
        self._closed = False
        self._busy = False
        """A task is suspended in ``__anext__`` (reading or parked): another task may not enter."""
        self._kept: Any = None
        """A waiter subscribed before the last read, kept while that read's chunks are yielded."""
        self._parked: Any = None
        """The waiter this reader is parked on, if any (the fail-safe timer wakes it)."""
        self._fail_safe: asyncio.TimerHandle | None = None
        self.last_info: StreamInfo | None = info
        """The stream info seen by the last read: the terminal status once the reader ended."""
        if subscribed is not None:
            self._buffer = chunks
            self.catch_up_head = info.head_sequence if info is not None else from_sequence
            last = chunks[-1][0] if chunks else from_sequence
            if info is not None and last >= info.head_sequence and manager.reads_are_current:
                self._kept = subscribed
            else:
                subscribed.cancel()

    def __aiter__(self) -> ResumableReader:
        return self

    @property
    def ready(self) -> int:
        """How many chunks the next ``__anext__`` calls return without waiting or reading."""
        return len(self._buffer) - self._next

    @property
    def caught_up(self) -> asyncio.Event:
        """Set once every backlog chunk up to ``catch_up_head`` was yielded (made on first use:
        an idle reader nobody asks holds none)."""
        if self._caught_up is None:
            self._caught_up = asyncio.Event()
            if self._is_caught_up:
                self._caught_up.set()
        return self._caught_up

    def _set_caught_up(self) -> None:
        self._is_caught_up = True
        if self._caught_up is not None:
            self._caught_up.set()

    def _is_live(self, info: StreamInfo | None) -> bool:
        if info is None:
            return False
        return info.status == ACTIVE or info.epoch != self._epoch_at_open

    async def __anext__(self) -> StoredChunk:
        """Return the next ``(sequence, chunk)``; raise StopAsyncIteration once the stream ended.

        Raises RuntimeError when another task is suspended inside ``__anext__`` of this
        reader (reading or parked): two tasks sharing one cursor would split or repeat
        chunks (the exactly-once contract of 002, "The backlog boundary", holds per
        reader), so give each task its own reader. A chunk already buffered is returned
        without suspending, so only the two awaits below mark the reader busy.
        """
        if self._busy:
            raise RuntimeError("another task is already iterating this ResumableReader; open one reader per task")
        while not self._closed:
            if self._next < len(self._buffer):
                sequence, chunk = self._buffer[self._next]
                self._next += 1
                self.current_sequence = sequence
                if self._next == len(self._buffer):
                    self._buffer, self._next = (), 0  # an idle reader keeps no chunk
                    if self.catch_up_head is not None and sequence >= self.catch_up_head:
                        self._set_caught_up()
                return sequence, chunk
            waiter: Any = self._kept
            self._kept = None
            if waiter is not None and not waiter.is_fired:
                # Subscribed before the last read, which reached the head, and silent since:
                # nothing was written or changed, so that read's info still stands (no read).
                info = self.last_info
            else:
                if waiter is not None:
                    waiter.cancel()
                waiter = self.manager.subscribe(self.stream_id)
                self._busy = True
                try:
                    chunks, info = await self.manager.read_after(self.stream_id, self.current_sequence)
                except BaseException:
                    waiter.cancel()
                    raise
                finally:
                    self._busy = False
                self.last_info = info
                if self.catch_up_head is None:
                    self.catch_up_head = info.head_sequence if info else self.current_sequence
                if chunks:
                    self._buffer, self._next = chunks, 0
                    if info is not None and chunks[-1][0] >= info.head_sequence and self.manager.reads_are_current:
                        self._kept = waiter  # the next wait needs no read unless it fires
                    else:
                        waiter.cancel()
                    if self._waiting_for_live and self._is_live(info):
                        self._waiting_for_live = False
                    continue
            self._set_caught_up()
            if self._waiting_for_live:
                if self._is_live(info):
                    self._waiting_for_live = False
                else:
                    await self._park(waiter)
                    continue
            if info is None or info.status in TERMINAL_STREAM_STATUSES:
                waiter.cancel()
                break
            await self._park(waiter)
        self._release()
        raise StopAsyncIteration

    async def _park(self, waiter: Any) -> None:
        """Wait for ``waiter`` or the fail-safe timer, whichever comes first.

        One timer per ``fail_safe_seconds``, not one per wait (a live reader parks once per
        stored chunk): armed when none is pending, it wakes whichever wait is parked when it
        fires. A reader so re-reads at most once per period without a wake-up, which only
        guards against a lost cross-process wake-up (docs/performance.md).
        """
        if self._closed:  # closed by another task during the read before this park
            waiter.cancel()
            return
        if self._fail_safe is None:
            loop = asyncio.get_running_loop()
            self._fail_safe = loop.call_later(self.fail_safe_seconds, _fail_safe_fired, weakref.ref(self))
        self._parked = waiter
        self._busy = True
        try:
            await waiter.wait()
        finally:
            self._parked = None
            self._busy = False

    def _release(self) -> None:
        if self._fail_safe is not None:
            self._fail_safe.cancel()
            self._fail_safe = None
        if self._parked is not None:  # close() from another task: the cancelled timer was its wake-up
            self._parked.expire()
        self._set_caught_up()
        self._closed = True
        if self._kept is not None:
            self._kept.cancel()
            self._kept = None

    async def close(self) -> None:
        """Stop the reader; ``caught_up`` is set and iteration ends."""
        self._release()

    def __del__(self) -> None:
        # A reader dropped without close() must not leave its kept waiter registered (a leaked
        # wake-up and cross-process listen). Released on its loop: the collector may run while
        # this thread holds the notifier's lock.
        kept: Any = getattr(self, "_kept", None)
        if kept is not None and not kept._loop.is_closed():
            kept._loop.call_soon_threadsafe(kept.cancel)


def _fail_safe_fired(ref: weakref.ref[ResumableReader]) -> None:
    """Wake the reader's parked wait, if any (a weak reference: the timer keeps no reader alive)."""
    reader = ref()
    if reader is not None:
        reader._fail_safe = None
        if reader._parked is not None:
            reader._parked.expire()
