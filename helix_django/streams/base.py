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
import weakref
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

    def with_head(self, head_sequence: int) -> StreamInfo:
        """Return this info with ``head_sequence`` moved (half the cost of ``dataclasses.replace``: the append path)."""
        return StreamInfo(
            self.stream_id, self.status, head_sequence, self.run_id, self.epoch, self.end_status, self.error
        )


@dataclasses.dataclass(frozen=True)
class WrittenInTransaction:
    """A stream write made inside a caller's transaction (:meth:`BaseStreamManager.append_in_transaction`).

    ``sequences`` of the chunks stored (none for a status change), ``info`` the stream as
    the write left it, ``payloads`` the stored JSON of each chunk: what readers are told
    once the transaction committed (:meth:`BaseStreamManager.wrote_in_transaction`).
    """

    sequences: list[int]
    info: StreamInfo | None
    payloads: list[str]


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

    @property
    def reads_are_current(self) -> bool:
        """Whether a read's info is current when it returns (never from a process-local cache).

        Only then may a reader that reached the head park on the waiter it subscribed
        before that read without reading again. Managers that may answer from a cache
        other processes' writes do not update return False.
        """
        return True

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

    async def claim_and_append(
        self, stream_id: str, run_id: str, *, epoch: int, chunks: Sequence[Chunk]
    ) -> tuple[StreamInfo, list[int]]:
        """Claim the stream (:meth:`claim_stream`), then store the claiming run's first ``chunks``.

        Returns ``(info at the claim, the chunks' sequences)``. A run's opening chunks
        (``helix-run-start``, ``start``) go out this way, before its first byte: a manager
        that can does both in one backend write (the database manager: one transaction).
        Raises what :meth:`claim_stream` and :meth:`append` raise.
        """
        info = await self.claim_stream(stream_id, run_id, epoch=epoch)
        return info, await self.append(stream_id, run_id, chunks) if chunks else []

    def joins_transactions_of(self, alias: str) -> bool:
        """Whether a claim may be made inside a transaction of database ``alias`` (see :meth:`claim_in_transaction`).

        The database manager on that alias: a run's start and its stream claim are then
        one transaction and one thread hop (issue 23). False for every other manager.
        """
        return False

    def claim_in_transaction(self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk]) -> Any:
        """Claim and store ``chunks`` inside the caller's transaction, on the ORM's thread; return a token.

        Only where :meth:`joins_transactions_of` is true. Once that transaction committed,
        pass the token to :meth:`claimed` on the event loop. Raises StreamFenceError (the
        caller's transaction then rolls back).
        """
        raise NotImplementedError

    def claimed(self, stream_id: str, token: Any) -> tuple[StreamInfo, list[int]]:
        """Once :meth:`claim_in_transaction`'s transaction committed: wake readers; return (claim info, sequences)."""
        raise NotImplementedError

    def append_in_transaction(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> WrittenInTransaction:
        """Store ``chunks`` inside the caller's transaction, on the ORM's thread; return what was written.

        Only where :meth:`joins_transactions_of` is true (a run's last step, its terminal
        commit and its stream's end are then one transaction, issue 23). Fenced as
        :meth:`append`: raises StreamFenceError, and the caller's transaction rolls back.
        Once it committed, pass every write, in order, to :meth:`wrote_in_transaction`.
        """
        raise NotImplementedError

    def end_in_transaction(self, stream_id: str, run_id: str, *, end_status: str) -> WrittenInTransaction:
        """End the stream (as :meth:`end_stream`) inside the caller's transaction; see :meth:`append_in_transaction`."""
        raise NotImplementedError

    def wrote_in_transaction(self, stream_id: str, writes: Sequence[WrittenInTransaction]) -> None:
        """Once the transaction of ``writes`` (made through this manager) committed: tell readers, wake them."""
        raise NotImplementedError

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
        subscribed: Any = None,
        chunks: Sequence[StoredChunk] = (),
    ) -> None:
        """``subscribed``: a waiter subscribed before the caller's read that returned ``info``
        and ``chunks`` (its chunks after ``from_sequence``, yielded first). When that read
        reached the head the reader keeps the waiter, so its first wait needs no read of its
        own unless the waiter fired: the caller's read stands in for it (issue 23)."""
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
        an idle reader nobody asks holds none, issue 23)."""
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


def raise_connection_error(exc: BaseException, what: str) -> StreamConnectionError:
    """Log ``exc`` (type only) and return a typed retryable StreamConnectionError for it."""
    logger.warning("stream backend %s failed: %s", what, type(exc).__name__)
    return StreamConnectionError(cause=what)
