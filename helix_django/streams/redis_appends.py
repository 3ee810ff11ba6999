"""The Redis stream manager's append queue: many streams' appends of one event loop in one pipeline.

Each append is the manager's append script (one atomic write of one stream). While a
loop's appends come slowly, each is sent at once in a task of its own
(:meth:`RedisStreamManager.append`), as a lone chat's flush wants. While they come at the
commit window's rate or faster (:mod:`.window`: ``OPTIONS["COMMIT_WINDOW_MS"]``, default
5, and ``OPTIONS["COMMIT_WINDOW_RATE"]``, default 2 000 per second), the appends of a
window go as one pipeline of scripts (one round trip and one task per window instead of
one per delta), each script still checking its own stream's fence. A refused script fails
its own append (StreamFenceError); a lost connection resends the whole pipeline for
``WRITE_RETRY_SECONDS``, which stores nothing twice (each script carries its batch id),
then fails every append of it (StreamConnectionError).
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from redis.exceptions import ResponseError

from helix_django.errors import StreamFenceError
from helix_django.streams import redis_scripts
from helix_django.streams.info import Chunk, raise_connection_error
from helix_django.streams.redis_connections import LoopState
from helix_django.streams.tail import TailCache
from helix_django.streams.window import CommitWindow


@dataclasses.dataclass(slots=True)
class PreparedAppend:
    """One append, encoded once: ``args`` of the append script (its batch id included), ``count``
    chunks, ``kept``: what the process tail keeps of them."""

    stream_id: str
    count: int
    args: list[Any]
    kept: list[Any]


class Appender(Protocol):
    """What the queue sends through: the Redis stream manager."""

    tail: TailCache

    def keys(self, stream_id: str) -> list[str]: ...

    def prepare_append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> PreparedAppend: ...

    def appended(self, write: PreparedAppend, token: int, values: Sequence[Any]) -> list[int]: ...

    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]: ...

    def _write(self, what: str, fn: Callable[[LoopState], Awaitable[Any]]) -> Awaitable[Any]: ...


class _Pending:
    """One event loop's queued appends, whether a batch is under way, and its commit window."""

    __slots__ = ("draining", "queue", "window")

    def __init__(self, window: CommitWindow) -> None:
        self.queue: list[tuple[PreparedAppend, asyncio.Future[list[int]]]] = []
        self.draining = False
        self.window = window


class RedisAppendQueue:
    """Per event loop, the appends waiting for the Redis manager's next pipelined batch."""

    def __init__(self, manager: Appender, window: tuple[float, float]) -> None:
        self.manager = manager
        self.window = window
        """``(seconds, rate)`` of each loop's :class:`~.window.CommitWindow` (``window_options``)."""
        self._pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pending] = weakref.WeakKeyDictionary()
        self._tasks: set[asyncio.Task[Any]] = set()
        """Batches under way (held, so none is collected before it ends)."""

    def submit(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Queue ``chunks`` of ``stream_id``; return the future of their sequences (the manager's append errors)."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = _Pending(CommitWindow(*self.window))
        now = loop.time()
        pending.window.count(now)
        wait = pending.window.wait(now)
        if not chunks or (wait <= 0 and not pending.draining and pending.window.rate < pending.window.rate_floor):
            return asyncio.ensure_future(self.manager.append(stream_id, run_id, chunks))  # appends come slowly
        future: asyncio.Future[list[int]] = loop.create_future()
        pending.queue.append((self.manager.prepare_append(stream_id, run_id, chunks), future))
        if pending.draining:
            return future  # the batch in flight, or the one scheduled, takes it
        pending.draining = True
        if wait > 0:
            loop.call_later(wait, self._start, loop, pending)
        else:
            self._start(loop, pending)
        return future

    def _start(self, loop: asyncio.AbstractEventLoop, pending: _Pending) -> None:
        task = loop.create_task(self._drain(loop, pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, loop: asyncio.AbstractEventLoop, pending: _Pending) -> None:
        """Send queued appends, a window apart, until none is left."""
        try:
            while pending.queue:
                # The first batch: _start ran at the window's end (or at once), so it does not wait.
                await pending.window.next_batch(loop, opened=False)
                batch, pending.queue = pending.queue, []
                await self._send(batch)
        finally:
            pending.draining = False

    async def _send(self, batch: list[tuple[PreparedAppend, asyncio.Future[list[int]]]]) -> None:
        """Send ``batch`` as one pipeline; settle each append's future with its sequences or its error."""
        manager = self.manager
        tokens = [manager.tail.begin_write(write.stream_id) for write, _future in batch]

        async def send(state: LoopState) -> list[Any]:
            async with state.client.pipeline(transaction=False) as pipe:
                for write, _future in batch:
                    await state.scripts["append"](keys=manager.keys(write.stream_id), args=write.args, client=pipe)
                return await pipe.execute(raise_on_error=False)

        try:
            replies = await manager._write("append", send)
        except BaseException as exc:
            for (write, future), token in zip(batch, tokens, strict=True):
                manager.tail.end_write(write.stream_id, token)  # stored or not: unknown, so nothing is kept
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (write, future), token, reply in zip(batch, tokens, replies, strict=True):
            if isinstance(reply, Exception):
                manager.tail.end_write(write.stream_id, token)
                if not future.done():
                    future.set_exception(_script_error(reply))
                continue
            sequences = manager.appended(write, token, reply)
            if not future.done():
                future.set_result(sequences)


def _script_error(reply: Exception) -> Exception:
    """The error of one refused script of a pipeline: its fence error, else a connection error."""
    message = str(reply)
    if isinstance(reply, ResponseError) and message.startswith(redis_scripts.FENCE_PREFIX):
        return StreamFenceError(cause=message.split()[-1])
    return raise_connection_error(reply, "append")
