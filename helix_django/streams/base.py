"""The stream manager contract (DESIGN, "Stream manager contract"; 002, "Key concepts").

One stream per session, shared by its turns; its chunks and statuses are in :mod:`.info`.
Sequences are assigned by the manager: strictly increasing per stream, never rewound or
reused. Every write is fenced on the run that holds the stream's claim.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Sequence
from typing import Any

from django.core.checks import CheckMessage

from helix_django.streams.info import (
    ACTIVE,
    ENDED,
    FAILED,
    PAUSED,
    RUN_ENDED,
    TERMINAL_STREAM_STATUSES,
    Chunk,
    StoredChunk,
    StreamInfo,
    raise_connection_error,
)
from helix_django.streams.notify import StreamNotifier
from helix_django.streams.reader import ResumableReader
from helix_django.streams.transactions import TransactionalWrites, WrittenInTransaction

__all__ = [
    "ACTIVE",
    "ENDED",
    "FAILED",
    "PAUSED",
    "RUN_ENDED",
    "TERMINAL_STREAM_STATUSES",
    "BaseStreamManager",
    "Chunk",
    "StoredChunk",
    "StreamInfo",
    "TransactionalWrites",
    "WrittenInTransaction",
    "raise_connection_error",
]


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
    supports_info_without_hop: bool = False
    """:meth:`get_info` answers on the event loop, with no thread hop (a send reads the head before its hop)."""
    transactions: TransactionalWrites | None = None
    """Writes that join a caller's database transaction (:mod:`.transactions`); None when unsupported."""

    @property
    def reads_are_current(self) -> bool:
        """Whether a read's info is current when it returns (never from a process-local cache).

        Only then may a reader that reached the head park on the waiter it subscribed
        before that read without reading again. Managers that may answer from a cache
        other processes' writes do not update return False.
        """
        return True

    @property
    def wakes_other_processes(self) -> bool:
        """Whether another process's write wakes this process's readers (not only their fail-safe timer).

        True for a multi-process manager unless it says otherwise.
        """
        return self.is_multi_process

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        self.alias = alias
        self.options = dict(options)
        self.notifier = StreamNotifier()

    # --- writes (fenced on run_id) -------------------------------------------------------

    @abc.abstractmethod
    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int, is_opening: bool = False) -> StreamInfo:
        """Make ``run_id`` the stream's writer and the stream ``active`` (compare-and-set on ``epoch``).

        Creates the stream when missing. Succeeds when ``epoch`` is greater than the
        current claim's epoch, or when ``run_id`` already holds the claim with the same
        epoch (re-activation after a pause). Raises StreamFenceError otherwise.

        ``is_opening``: the run's own first claim (:meth:`claim_and_append`). It never
        re-activates a stream its run's claim left ``ended``, ``failed`` or ``paused``: the
        run was ended elsewhere before this claim landed (a Stop or a recovery served by
        another process closes the stream for the run at its epoch,
        :func:`~helix_django.recovery.outcomes.aclose_stream`), and StreamFenceError
        (``cause: run_ended``) is raised. A repeat of the claim on a stream it left
        ``active`` (a resend after a lost reply) still succeeds.
        """

    async def claim_and_append(
        self, stream_id: str, run_id: str, *, epoch: int, chunks: Sequence[Chunk]
    ) -> tuple[StreamInfo, list[int]]:
        """Claim the stream (:meth:`claim_stream`), then store the claiming run's first ``chunks``.

        Returns ``(info at the claim, the chunks' sequences)``. A run's opening chunks
        (``helix-run-start``, ``start``) go out this way, before its first byte: a manager
        that can does both in one backend write (the database manager: one transaction).
        An opening claim (``is_opening``): a stream already closed for the run refuses it
        (``run_ended``). Raises what :meth:`claim_stream` and :meth:`append` raise.
        """
        info = await self.claim_stream(stream_id, run_id, epoch=epoch, is_opening=True)
        return info, await self.append(stream_id, run_id, chunks) if chunks else []

    @abc.abstractmethod
    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        """Store ``chunks`` in order and return their sequences (one batch, one backend write).

        Raises StreamFenceError if ``run_id`` does not hold the claim or the stream is not
        active, StreamConnectionError (retryable) if the backend cannot be written.
        """

    def append_soon(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Start :meth:`append` and return a future of its sequences (same errors, on the future).

        The stream writer chains its flushes on this future. The default runs ``append``
        in a task; a manager that already queues writes returns its own future (no task).
        """
        return asyncio.ensure_future(self.append(stream_id, run_id, chunks))

    @abc.abstractmethod
    async def purge_stream(self, stream_id: str) -> None:
        """Delete the stored chunks of a stream whose session was deleted.

        The stream is left ``ended`` with no run and no error, and its head and claim epoch
        stay: sequences are never reused, and a session that later takes the same id starts
        after the old head, so none of the deleted session's chunks reach it. A no-op for a
        stream that does not exist. Not fenced: call it only for a session with no live run.
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
    ) -> ResumableReader[BaseStreamManager] | None:
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
        chunks, _info = await self._read_batches(stream_id, after, stop_at_head=False)
        return chunks

    async def read_backlog(self, stream_id: str, *, after: int = 0) -> tuple[list[StoredChunk], StreamInfo | None]:
        """Return the chunks after ``after`` up to the head the last read reported, and that info.

        The backlog of a reader that follows the stream live from there: unlike
        :meth:`read_all`, it stops once a batch reaches the reported head, so a caught-up
        read costs nothing more (chunks stored after that info was taken come live).
        The info is None when the stream does not exist.
        """
        return await self._read_batches(stream_id, after, stop_at_head=True)

    async def _read_batches(
        self, stream_id: str, after: int, *, stop_at_head: bool
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        """Read batches of 1 000 until one is empty (or, ``stop_at_head``, reaches its info's head)."""
        out: list[StoredChunk] = []
        while True:
            batch, info = await self.read_after(stream_id, after, limit=1000)
            out.extend(batch)
            at_head = info is None or (bool(batch) and batch[-1][0] >= info.head_sequence)
            if not batch or (stop_at_head and at_head):
                return out, info
            after = batch[-1][0]

    def check(self) -> list[CheckMessage]:
        """Validate OPTIONS; return Django check messages."""
        return []

    async def aclose(self) -> None:
        """Release connections held by the manager (none by default)."""
        return None

    def close(self) -> None:
        """Close, from any thread, the connections this manager opened itself (none by default).

        Called when the registry forgets the manager (:func:`~helix_django.streams.reset_stream_managers`).
        """
        return None
