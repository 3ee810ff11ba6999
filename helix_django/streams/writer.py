"""The stream writer: buffers one run's chunks and appends them in batches (DESIGN: one write per flush)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from helix_django.conf import helix_settings
from helix_django.limits import DELTA_TYPES, max_delta_chars, split_delta
from helix_django.streams.base import BaseStreamManager, Chunk

MERGEABLE_DELTA_TYPES = frozenset({"text-delta", "reasoning-delta"})
#: Internal chunk key: wall-clock time of the flush that stored the chunk, epoch milliseconds
#: (the admin timeline's times and gaps; stripped before a client sees the chunk, like ``_run``).
WRITTEN_AT_KEY = "_at"
MAX_MERGED_DELTA_CHARS = 8192


class StreamWriter:
    """Buffers one run's chunks and appends them in batches (DESIGN: one write per flush).

    ``write()`` never blocks. The first chunk written after ``flush_interval_ms`` without
    a flush is flushed at once (leading edge); otherwise a flush happens once
    ``flush_interval_ms`` have passed since the last one, or once ``max_chunks`` are
    pending, and on :meth:`flush`. One append is in flight at a time: chunks written
    meanwhile are appended as one batch as soon as it returns (chained on the manager's
    future, no task or timer per flush). An error from a background flush
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
        max_delta_chars: int | None = None,
    ) -> None:
        self.manager = manager
        self.stream_id = stream_id
        self.run_id = run_id
        self.flush_interval = flush_interval_ms / 1000
        self.max_chunks = max_chunks
        self.coalesce_deltas = coalesce_deltas
        """Merge a delta into the pending delta before it when both continue one part (see :func:`can_merge`)."""
        self.max_delta_chars = max_delta_chars
        """Split a longer text/reasoning delta into deltas of this many characters (None: never split)."""
        self.last_sequence = 0
        """Sequence of the last chunk stored by this writer (0 before the first flush)."""
        self._pending: list[Chunk] = []
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: asyncio.Future[list[int]] | None = None
        self._error: BaseException | None = None
        self._flushed_at = -math.inf
        self._is_taking = False

    @classmethod
    def from_settings(cls, manager: BaseStreamManager, stream_id: str, run_id: str) -> StreamWriter:
        """Return a writer configured by ``FLUSH_INTERVAL_MS``, ``FLUSH_MAX_CHUNKS``, ``COALESCE_DELTAS``, limits."""
        return cls(
            manager,
            stream_id,
            run_id,
            flush_interval_ms=helix_settings.FLUSH_INTERVAL_MS,
            max_chunks=helix_settings.FLUSH_MAX_CHUNKS,
            coalesce_deltas=helix_settings.COALESCE_DELTAS,
            max_delta_chars=max_delta_chars(),
        )

    def write(self, chunk: Chunk) -> None:
        """Queue ``chunk`` for the next batch (an oversized delta as several, see ``max_delta_chars``)."""
        if self._error is not None:
            raise self._error
        limit = self.max_delta_chars
        delta = chunk.get("delta")
        if limit is not None and isinstance(delta, str) and len(delta) > limit and chunk["type"] in DELTA_TYPES:
            for piece in split_delta(chunk, limit):
                self.write(piece)
            return
        pending = self._pending
        if self.coalesce_deltas and pending and can_merge(pending[-1], chunk):
            # Not stored yet, so no sequence was assigned: the merged text is stored and read once.
            # A flush is already armed for the pending chunk.
            pending[-1] = {**pending[-1], "delta": pending[-1]["delta"] + chunk["delta"]}
            return
        pending.append(chunk)
        if self._inflight is not None:
            return  # the append in flight chains the next batch
        if self._timer is not None and len(pending) < self.max_chunks:
            return  # the armed timer flushes it
        loop = asyncio.get_running_loop()
        wait = self._flushed_at + self.flush_interval - loop.time()
        if wait <= 0 or len(pending) >= self.max_chunks:
            # Leading edge: the first chunk after a quiet window goes out at once (time to first
            # byte, live delay); chunks written while that append is in flight form the next batch.
            self._send()
        else:
            self._timer = loop.call_later(wait, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._inflight is None and self._pending and self._error is None and not self._is_taking:
            self._send()

    def _send(self) -> None:
        """Append every pending chunk as one batch (nothing may be in flight)."""
        self._inflight = self.manager.append_soon(self.stream_id, self.run_id, self._take_pending())
        self._inflight.add_done_callback(self._on_appended)

    def _take_pending(self) -> list[Chunk]:
        """Return the pending chunks stamped with this flush's time; the writer no longer holds them."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        self._flushed_at = asyncio.get_running_loop().time()
        written_at_ms = int(time.time() * 1000)
        for chunk in batch:
            chunk[WRITTEN_AT_KEY] = written_at_ms
        return batch

    def _on_appended(self, future: asyncio.Future[list[int]]) -> None:
        if future is not self._inflight:
            return  # already handled (by flush(), or this is the callback after it)
        self._inflight = None
        if future.cancelled():
            self._error = asyncio.CancelledError("the append was cancelled")
            return
        error = future.exception()
        if error is not None:
            self._error = error
            return
        sequences = future.result()
        if sequences:
            self.last_sequence = sequences[-1]
        if self._pending and not self._is_taking:
            self._send()

    async def flush(self) -> int:
        """Store every pending chunk now; return the last stored sequence."""
        while True:
            await self._settle()
            if not self._pending:
                return self.last_sequence
            self._send()

    async def take(self, *last: Chunk) -> list[Chunk]:
        """Wait for the append in flight, then hand over the pending chunks and ``last``, stamped as a flush would.

        For a caller that stores them itself: a run's last chunks are stored with its
        terminal commit. ``last`` never goes out in a flush of its own (as a
        :meth:`write` after a quiet window would). The writer holds none of them
        afterwards; the caller sets :attr:`last_sequence` once they are stored. Raises the
        error of a failed earlier flush.
        """
        self._is_taking = True  # chunks pending meanwhile are not chained as a batch of their own
        try:
            await self._settle()
        finally:
            self._is_taking = False
        self._pending.extend(last)
        return self._take_pending()

    def restore(self, chunks: list[Chunk]) -> None:
        """Put chunks handed over by :meth:`take` back, first in line (their caller could not store them)."""
        self._pending[:0] = chunks

    async def _settle(self) -> None:
        """Wait until no append is in flight (chunks written meanwhile stay pending); raise a flush's error."""
        while True:
            if self._error is not None:
                raise self._error
            inflight = self._inflight
            if inflight is None:
                return
            # Shielded: a caller cancelled here must not cancel the shared append.
            with contextlib.suppress(Exception):  # recorded as self._error by _on_appended
                await asyncio.shield(inflight)
            self._on_appended(inflight)  # its scheduled callback may not have run yet

    def discard(self) -> None:
        """Drop pending chunks (the run lost its claim or is being abandoned)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()


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
