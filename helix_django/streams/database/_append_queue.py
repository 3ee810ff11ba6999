"""The database stream manager's append queue: appends of one event loop gathered into group commits.

``submit`` queues a stream's chunks and returns the future of their sequences (no task per
append). The first append of an idle loop schedules a drain with ``call_soon``: the
appends queued by then are committed as one group (:mod:`._group_commit`), inline on the
loop for SQLite where that never waits, else on the ORM's thread, where appends arriving
meanwhile form the next group. While a loop's appends come fast, its group commits start
a commit window apart (:mod:`..window`), so at a hundred live runs a transaction carries
tens of deltas instead of two or three. A lone append
(nothing else ready on the loop, see :func:`is_last_callback`) is committed inline at
once: it does not wait a loop round that could add nothing to its group. (The ORM
thread's path keeps its ``call_soon`` round: on PostgreSQL a drain task started at once
can hang a run; docs/performance-history.md.) A batch whose commit fails transiently
retries on a task of its own, so nothing queued behind it waits for its backoff.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from helix_django.errors import StreamConnectionError
from helix_django.orm import FIRST_RETRY_DELAY_SECONDS, TRANSIENT_ERRORS
from helix_django.streams.database._group_commit import GroupCommit
from helix_django.streams.info import Chunk
from helix_django.streams.notify import StreamNotifier
from helix_django.streams.tail import TailCache
from helix_django.streams.window import CommitWindow

logger = logging.getLogger("helix_django.streams.database")


def is_last_callback(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether nothing else is ready to run on ``loop`` after the running callback (False when unknown).

    A drain scheduled with ``call_soon`` then runs first thing in the next round, before
    any timer or socket callback of that round, so it would commit exactly the appends
    queued by now: the round trip gains no batching and only costs a loop iteration (a
    selector call) per lone append. Reads asyncio's ready queue (``_ready``,
    a deque in ``BaseEventLoop`` since Python 3.4); a loop without one (uvloop) keeps the
    ``call_soon`` round.
    """
    ready = getattr(loop, "_ready", None)
    return ready is not None and not ready


class Committer(Protocol):
    """What the queue commits through: the database manager (read on every use, so a test may wrap a part)."""

    group: GroupCommit
    tail: TailCache
    notifier: StreamNotifier

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, retry: bool = ...) -> Awaitable[Any]: ...

    def _append_many_sync(self, requests: list[tuple[str, str, Sequence[Chunk]]]) -> list[Any]: ...


class _Pending:
    """The appends one event loop queued for its next group commit, whether a commit is under way, and
    the loop's commit window (:mod:`..window`)."""

    __slots__ = ("draining", "queue", "window")

    def __init__(self, window: CommitWindow) -> None:
        self.queue: list[tuple[str, str, list[Chunk], asyncio.Future[list[int]]]] = []
        self.draining = False
        self.window = window


class AppendQueue:
    """Per event loop, the appends waiting for the manager's next group commit."""

    def __init__(self, manager: Committer, window: tuple[float, float] = (0.0, 0.0)) -> None:
        self.manager = manager
        self.window = window
        """``(seconds, rate)`` of each loop's :class:`~..window.CommitWindow` (``window_options``)."""
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pending] = weakref.WeakKeyDictionary()
        self._last_pending: tuple[asyncio.AbstractEventLoop, _Pending] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        """Drains, retries and checkpoints under way (held, so none is collected before it ends)."""

    def submit(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Queue ``chunks`` for the next group commit; return the future of their sequences.

        The future raises StreamFenceError (that stream only) or StreamConnectionError.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[int]] = loop.create_future()
        if not chunks:
            future.set_result([])
            return future
        pending = self._pending_of(loop)
        pending.queue.append((stream_id, run_id, list(chunks), future))
        now = loop.time()
        pending.window.count(now)
        if pending.draining:
            return future  # the commit in flight, or the drain already scheduled, takes it
        pending.draining = True
        wait = pending.window.wait(now)
        if wait > 0:
            # A group committed moments ago: this one gathers what other streams append meanwhile.
            loop.call_later(wait, self._drain_now, loop, pending)
        elif self.manager.group.may_run_inline and is_last_callback(loop):
            self._drain_now(loop, pending)  # a lone append: nothing else can join its group this round
        else:
            loop.call_soon(self._drain_now, loop, pending)
        return future

    def _start(self, loop: asyncio.AbstractEventLoop, coro: Any) -> None:
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _pending_of(self, loop: asyncio.AbstractEventLoop) -> _Pending:
        """The append queue of ``loop`` (the last loop's is kept at hand: one loop serves nearly every call)."""
        last = self._last_pending
        if last is not None and last[0] is loop:
            return last[1]
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = _Pending(CommitWindow(*self.window))
        self._last_pending = (loop, pending)
        return pending

    def _drain_now(self, loop: asyncio.AbstractEventLoop, pending: _Pending) -> None:
        """Commit the queued appends on the loop (inline), or start the task committing them on the ORM's thread."""
        pending.window.start(loop.time())
        batch, pending.queue = pending.queue, []
        try:
            results = self.manager.group.run_inline(
                [(stream_id, run_id, chunks) for stream_id, run_id, chunks, _f in batch]
            )
        except Exception:  # noqa: BLE001 - the ORM thread's path commits it, or reports the error typed
            logger.exception("inline stream append failed")
            results = None
        if results is None:
            pending.queue[:0] = batch
            self._start(loop, self._drain(loop, pending))
            return
        self._settle(batch, results)
        pending.draining = False
        if self.manager.group.inline is not None and self.manager.group.inline.checkpoint_due:
            self._start(loop, self._checkpoint())

    async def _drain(self, loop: asyncio.AbstractEventLoop, pending: _Pending) -> None:
        """Commit queued appends until none is left: inline where possible, else on the ORM's thread.

        A batch whose commit fails transiently (``TRANSIENT_ERRORS``: a full disk, a lost
        connection) retries on a task of its own (:meth:`_retry`), so the appends queued
        meanwhile never wait behind its backoff: other streams', and a recovery closing the
        stream of a run whose writer is stuck (the disk-full fault's lost chunks,
        ``tests/streams/test_appends_never_wait_behind_a_failed_batchs_retries.py``).
        """
        opened = True  # its window started with the _drain_now that started this task
        try:
            while pending.queue:
                await pending.window.next_batch(loop, opened=opened)
                opened = False
                batch, pending.queue = pending.queue, []
                requests = [(stream_id, run_id, chunks) for stream_id, run_id, chunks, _future in batch]
                tokens: list[int] = []  # inline commits settle in the same loop turn: nothing is heard before
                try:
                    results = self.manager.group.run_inline(requests)
                    if results is None:
                        tokens = self._begin(batch)
                        results = await self.manager._call("append", self.manager._append_many_sync, requests)
                except StreamConnectionError as exc:
                    self._end(batch, tokens)
                    if isinstance(exc.__cause__, TRANSIENT_ERRORS):  # nothing of it was stored: it retries alone
                        self._start(loop, self._retry(batch, requests))
                    else:
                        self._fail(batch, exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - each append's future gets it
                    self._end(batch, tokens)
                    self._fail(batch, exc)
                    continue
                except BaseException:
                    self._end(batch, tokens)
                    raise
                self._settle(batch, results, tokens or None)
        finally:
            pending.draining = False

    async def _retry(self, batch: list[Any], requests: list[tuple[str, str, list[Chunk]]]) -> None:
        """Commit a batch whose first commit failed, retrying as :func:`~helix_django.orm.retry_transient` does.

        Its first retry comes FIRST_RETRY_DELAY_SECONDS after that failure; it gives up
        ``DATABASE_RETRY_SECONDS`` after its first retry failed (StreamConnectionError).
        """
        await asyncio.sleep(FIRST_RETRY_DELAY_SECONDS)
        tokens = self._begin(batch)
        try:
            results = await self.manager._call("append", self.manager._append_many_sync, requests, retry=True)
        except Exception as exc:  # noqa: BLE001 - StreamConnectionError: nothing of this batch was stored
            self._end(batch, tokens)
            self._fail(batch, exc)
            return
        except BaseException:
            self._end(batch, tokens)
            raise
        self._settle(batch, results, tokens)

    def _begin(self, batch: list[Any]) -> list[int]:
        """Note each append of ``batch`` as a write in flight in the tail (:meth:`TailCache.begin_write`).

        A commit on the ORM's thread is replied to a loop turn or more later: another
        process's notice of the stream (a takeover) may be heard before the reply, and its
        forget then keeps this commit's chunks and info out of the tail.
        """
        tail = self.manager.tail
        return [tail.begin_write(stream_id) for stream_id, _run_id, _chunks, _future in batch]

    def _end(self, batch: list[Any], tokens: list[int]) -> None:
        """End the writes of a batch whose commit failed (their tail entries are dropped); none begun: no-op."""
        if not tokens:
            return
        tail = self.manager.tail
        for (stream_id, _run_id, _chunks, _future), token in zip(batch, tokens, strict=True):
            tail.end_write(stream_id, token)

    @staticmethod
    def _fail(batch: list[Any], exc: BaseException) -> None:
        """Fail every append of ``batch`` with ``exc`` (nothing of it was stored)."""
        for *_request, future in batch:
            if not future.done():
                future.set_exception(exc)

    def _settle(self, batch: list[Any], results: list[Any], tokens: list[int] | None = None) -> None:
        """Resolve each append's future with its sequences (or its fence error), record the tail, wake readers.

        ``tokens``: those of :meth:`_begin` when the commit left the loop (see there).
        """
        tail = self.manager.tail
        for number, ((stream_id, _run_id, _chunks, future), result) in enumerate(zip(batch, results, strict=True)):
            if isinstance(result, Exception):
                if tokens is not None:
                    tail.end_write(stream_id, tokens[number])
                tail.forget(stream_id)
                if not future.done():
                    future.set_exception(result)
                continue
            sequences, info, payloads = result
            if tokens is None:
                tail.extend(stream_id, info, sequences[0], payloads)
            else:
                tail.end_write(stream_id, tokens[number], info, sequences[0], payloads)
            if not future.done():
                future.set_result(sequences)
        for stream_id in {request[0] for request in batch}:
            self.manager.notifier.notify(stream_id)

    async def _checkpoint(self) -> None:
        """Checkpoint the WAL on the ORM's thread (the inline connection never does); a failure is logged."""
        try:
            await self.manager._call("checkpoint", self.manager.group.checkpoint_sync)
        except Exception as exc:  # noqa: BLE001 - the next checkpoint, or any other connection's, catches up
            logger.warning("WAL checkpoint failed: %s", type(exc).__name__)
