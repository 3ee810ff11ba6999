"""The stream manager contract (DESIGN, "Stream manager contract"; 002, "Key concepts").

One stream per session, shared by its turns. A chunk is a JSON-able dict with a
``"type"`` (an AI SDK UI message stream chunk type or a ``helix-*`` internal type) and
the reserved metadata keys ``_run`` (run id), ``_attempt`` (attempt id) and ``_step``.
Sequences are assigned by the manager: strictly increasing per stream, never rewound or
reused. Every write is fenced on the run that holds the stream's claim.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import logging
import math
from collections import deque
from collections.abc import Sequence
from typing import Any

from django.core.checks import CheckMessage

from helix_django.errors import StreamConnectionError
from helix_django.streams.notify import StreamNotifier

logger = logging.getLogger(__name__)

Chunk = dict[str, Any]
StoredChunk = tuple[int, Chunk]

ACTIVE, PAUSED, ENDED, FAILED = "active", "paused", "ended", "failed"
TERMINAL_STREAM_STATUSES = frozenset({PAUSED, ENDED, FAILED})


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """The stream's own state (002, "Stream status"): never a run's liveness."""

    stream_id: str
    status: str
    """``active``, ``paused``, ``ended`` or ``failed``."""
    head_sequence: int
    """Highest sequence assigned so far (0 for a stream with no chunk)."""
    run_id: str
    """The run holding the claim ('' when none)."""
    epoch: int = 0
    """Fencing token of the claim: a claim with a lower epoch is refused."""
    end_status: str = ""
    """For ``ended``: how the run ended (``completed``, ``cancelled``, ``interrupted``)."""
    error: dict[str, Any] | None = None
    """For ``failed``: the typed error body."""


class BaseStreamManager(abc.ABC):
    """A backend that stores chunks of session streams and serves resumable readers.

    Subclasses implement the primitive operations; readers are built on
    :meth:`read_after` and :meth:`wait_for_change`. All methods are async.
    """

    supports_pubsub: bool = False
    """Pushes new chunks to live readers without polling."""
    is_persistent: bool = False
    """Chunks survive a restart of the process."""
    is_multi_process: bool = False
    """Several processes may read and write the same streams."""

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        self.alias = alias
        self.options = dict(options)
        self.notifier = StreamNotifier()

    # --- writes (fenced on run_id) -------------------------------------------------------

    @abc.abstractmethod
    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int) -> StreamInfo:
        """Make ``run_id`` the stream's writer and the stream ``active`` (compare-and-set on ``epoch``).

        Creates the stream when missing. Succeeds when ``epoch`` is greater than the
        current claim's epoch, or when ``run_id`` already holds the claim with the same
        epoch (re-activation after a pause). Raises StreamFenceError otherwise.
        """

    @abc.abstractmethod
    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        """Store ``chunks`` in order and return their sequences (one batch, one backend write).

        Raises StreamFenceError if ``run_id`` does not hold the claim or the stream is not
        active, StreamConnectionError (retryable) if the backend cannot be written.
        """

    @abc.abstractmethod
    async def end_stream(self, stream_id: str, run_id: str, *, end_status: str = "completed") -> StreamInfo:
        """Mark the stream ``ended`` with ``end_status``. Fenced like :meth:`append`."""

    @abc.abstractmethod
    async def fail_stream(self, stream_id: str, run_id: str, error: dict[str, Any]) -> StreamInfo:
        """Append one ``error`` chunk carrying ``error`` (a typed body) and mark the stream ``failed``.

        Fenced like :meth:`append`. A reader ends after yielding that chunk.
        """

    @abc.abstractmethod
    async def pause_stream(self, stream_id: str, run_id: str) -> StreamInfo:
        """Mark the stream ``paused`` (a human-in-the-loop boundary). Fenced like :meth:`append`."""

    # --- reads ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def get_info(self, stream_id: str) -> StreamInfo | None:
        """Return the stream's own status; None only when the stream does not exist.

        Raises StreamConnectionError for a failed read: an outage is never "absent".
        """

    @abc.abstractmethod
    async def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        """Return up to ``limit`` chunks with sequence > ``after``, oldest first, and the info.

        The info is read atomically with the chunks, so ``info.head_sequence`` covers them.
        Raises StreamConnectionError for a failed read; never returns [] for one.
        """

    def subscribe(self, stream_id: str) -> Any:
        """Return a waiter fired by the next write or status change of ``stream_id``."""
        return self.notifier.subscribe(stream_id)

    async def create_resumable_reader(
        self, stream_id: str, *, from_sequence: int = 0, wait_for_live: bool = False
    ) -> ResumableReader | None:
        """Open a reader yielding ``(sequence, chunk)`` with sequence > ``from_sequence``.

        Returns None when the stream does not exist or has failed, unless
        ``wait_for_live``: then the reader parks until a run claims the stream (002,
        "The run-start window"); a terminal status left from the previous turn never ends it.
        """
        info = await self.get_info(stream_id)
        if not wait_for_live and (info is None or info.status == FAILED):
            return None
        return ResumableReader(self, stream_id, from_sequence=from_sequence, wait_for_live=wait_for_live, info=info)

    async def read_all(self, stream_id: str, *, after: int = 0) -> list[StoredChunk]:
        """Return every stored chunk with sequence > ``after`` (for replays and recovery)."""
        out: list[StoredChunk] = []
        while True:
            batch, _info = await self.read_after(stream_id, after, limit=1000)
            if not batch:
                return out
            out.extend(batch)
            after = batch[-1][0]

    async def read_backlog(self, stream_id: str, *, after: int = 0) -> tuple[list[StoredChunk], StreamInfo | None]:
        """Return the chunks after ``after`` up to the head the last read reported, and that info.

        The backlog of a reader that follows the stream live from there: unlike
        :meth:`read_all`, it stops once a batch reaches the reported head, so a caught-up
        read costs nothing more (chunks stored after that info was taken come live).
        The info is None when the stream does not exist.
        """
        out: list[StoredChunk] = []
        while True:
            batch, info = await self.read_after(stream_id, after, limit=1000)
            out.extend(batch)
            if not batch or info is None or batch[-1][0] >= info.head_sequence:
                return out, info
            after = batch[-1][0]

    def check(self) -> list[CheckMessage]:
        """Validate OPTIONS; return Django check messages."""
        return []

    async def aclose(self) -> None:
        """Release connections held by the manager (none by default)."""
        return None


class ResumableReader:
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
        manager: BaseStreamManager,
        stream_id: str,
        *,
        from_sequence: int,
        wait_for_live: bool,
        info: StreamInfo | None,
    ) -> None:
        self.manager = manager
        self.stream_id = stream_id
        self.current_sequence = from_sequence
        self.catch_up_head: int | None = None
        self.caught_up = asyncio.Event()
        self._buffer: deque[StoredChunk] = deque()
        self._waiting_for_live = wait_for_live
        self._run_at_open = info.run_id if info else None
        self._epoch_at_open = info.epoch if info else -1
        self._closed = False
        self.last_info: StreamInfo | None = info
        """The stream info seen by the last read: the terminal status once the reader ended."""

    def __aiter__(self) -> ResumableReader:
        return self

    def _is_live(self, info: StreamInfo | None) -> bool:
        if info is None:
            return False
        return info.status == ACTIVE or info.epoch != self._epoch_at_open

    async def __anext__(self) -> StoredChunk:
        while not self._closed:
            if self._buffer:
                sequence, chunk = self._buffer.popleft()
                self.current_sequence = sequence
                if self.catch_up_head is not None and sequence >= self.catch_up_head and not self._buffer:
                    self.caught_up.set()
                return sequence, chunk
            waiter = self.manager.subscribe(self.stream_id)
            try:
                chunks, info = await self.manager.read_after(self.stream_id, self.current_sequence)
            except BaseException:
                waiter.cancel()
                raise
            self.last_info = info
            if self.catch_up_head is None:
                self.catch_up_head = info.head_sequence if info else self.current_sequence
            if chunks:
                waiter.cancel()
                self._buffer.extend(chunks)
                if self._waiting_for_live and self._is_live(info):
                    self._waiting_for_live = False
                continue
            self.caught_up.set()
            if self._waiting_for_live:
                if self._is_live(info):
                    self._waiting_for_live = False
                else:
                    await waiter.wait(self.fail_safe_seconds)
                    continue
            if info is None or info.status in TERMINAL_STREAM_STATUSES:
                waiter.cancel()
                break
            await waiter.wait(self.fail_safe_seconds)
        self.caught_up.set()
        self._closed = True
        raise StopAsyncIteration

    async def close(self) -> None:
        """Stop the reader; ``caught_up`` is set and iteration ends."""
        self._closed = True
        self.caught_up.set()


class StreamWriter:
    """Buffers one run's chunks and appends them in batches (DESIGN: one write per flush).

    ``write()`` never blocks. The first chunk written after ``flush_interval_ms`` without
    a flush is flushed at once (leading edge); otherwise a flush happens after
    ``flush_interval_ms`` or once ``max_chunks`` are pending, and on :meth:`flush`.
    Chunks written while a flush is in flight are stored right after it, as one batch. An error from a background flush
    (StreamFenceError, StreamConnectionError) is raised by the next ``write``/``flush``.
    """

    def __init__(
        self,
        manager: BaseStreamManager,
        stream_id: str,
        run_id: str,
        *,
        flush_interval_ms: float = 15,
        max_chunks: int = 64,
        coalesce_deltas: bool = False,
    ) -> None:
        self.manager = manager
        self.stream_id = stream_id
        self.run_id = run_id
        self.flush_interval = flush_interval_ms / 1000
        self.max_chunks = max_chunks
        self.coalesce_deltas = coalesce_deltas
        """Merge a delta into the pending delta before it when both continue one part (see :func:`can_merge`)."""
        self.last_sequence = 0
        """Sequence of the last chunk stored by this writer (0 before the first flush)."""
        self._pending: list[Chunk] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._error: BaseException | None = None
        self._flushed_at = -math.inf

    @classmethod
    def from_settings(cls, manager: BaseStreamManager, stream_id: str, run_id: str) -> StreamWriter:
        """Return a writer configured by ``FLUSH_INTERVAL_MS``, ``FLUSH_MAX_CHUNKS`` and ``COALESCE_DELTAS``."""
        from helix_django.conf import helix_settings

        return cls(
            manager,
            stream_id,
            run_id,
            flush_interval_ms=helix_settings.FLUSH_INTERVAL_MS,
            max_chunks=helix_settings.FLUSH_MAX_CHUNKS,
            coalesce_deltas=helix_settings.COALESCE_DELTAS,
        )

    def write(self, chunk: Chunk) -> None:
        """Queue ``chunk`` for the next batch."""
        if self._error is not None:
            raise self._error
        pending = self._pending
        if self.coalesce_deltas and pending and can_merge(pending[-1], chunk):
            # Not stored yet, so no sequence was assigned: the merged text is stored and read once.
            # A flush is already armed for the pending chunk.
            pending[-1] = {**pending[-1], "delta": pending[-1]["delta"] + chunk["delta"]}
            return
        pending.append(chunk)
        if len(pending) >= self.max_chunks:
            self._schedule(0)
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            is_idle = self._flushing is None or self._flushing.done()
            if is_idle and loop.time() - self._flushed_at >= self.flush_interval:
                # Leading edge: the first chunk after a quiet window goes out at once (time to first
                # byte, live delay); chunks written while that flush is in flight form the next batch.
                self._schedule(0)
            else:
                self._timer = loop.call_later(self.flush_interval, self._schedule, 0)

    def _schedule(self, _delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._background_flush())

    async def _background_flush(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # surfaced on the next write/flush
            self._error = exc

    async def flush(self) -> int:
        """Store every pending chunk now; return the last stored sequence."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            if self._error is not None:
                raise self._error
            while self._pending:
                self._flushed_at = asyncio.get_running_loop().time()
                batch, self._pending = self._pending, []
                try:
                    sequences = await self.manager.append(self.stream_id, self.run_id, batch)
                except Exception as exc:
                    self._error = exc
                    raise
                if sequences:
                    self.last_sequence = sequences[-1]
        return self.last_sequence

    def discard(self) -> None:
        """Drop pending chunks (the run lost its claim or is being abandoned)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()


MERGEABLE_DELTA_TYPES = frozenset({"text-delta", "reasoning-delta"})
MAX_MERGED_DELTA_CHARS = 8192


def can_merge(first: Chunk, second: Chunk) -> bool:
    """Return whether ``second`` may be appended to ``first``'s ``delta`` as one chunk.

    Both are ``text-delta`` (or both ``reasoning-delta``) chunks with the same keys and
    equal values except ``delta`` (same part ``id``, run, attempt, step, metadata), and
    the merged delta stays under MAX_MERGED_DELTA_CHARS. A client applying the merged
    chunk builds the same message as applying both (AI SDK delta semantics).
    """
    kind = first.get("type")
    if kind not in MERGEABLE_DELTA_TYPES or second.get("type") != kind or first.keys() != second.keys():
        return False
    left, right = first.get("delta"), second.get("delta")
    if not isinstance(left, str) or not isinstance(right, str) or len(left) + len(right) > MAX_MERGED_DELTA_CHARS:
        return False
    return all(first[key] == second[key] for key in first if key != "delta")


def raise_connection_error(exc: BaseException, what: str) -> StreamConnectionError:
    """Log ``exc`` (type only) and return a typed retryable StreamConnectionError for it."""
    logger.warning("stream backend %s failed: %s", what, type(exc).__name__)
    return StreamConnectionError(cause=what)
