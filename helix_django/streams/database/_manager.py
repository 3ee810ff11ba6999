"""Database stream manager: chunks in the ``StreamChunk`` table, one transaction per flush.

The embedded default (SQLite in WAL mode) and the single-database scale-out on
PostgreSQL. A batch is allocated its sequences and inserted with one ``executemany`` in
one transaction that also checks the run-id fence and moves the head. Readers bound
each chunk read by the head read just before it, so chunk and info reads agree without a
read transaction. Readers in this process wake on the notifier; readers in other
processes through the Channels layer (:mod:`helix_django.streams.broadcast`). The
writes on the ORM's thread (claims, inserts, fenced status changes, purges) are in
:mod:`._writes`; this module holds the manager: its reads and its async API.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connections, router

from helix_django.errors import StreamFenceError
from helix_django.models import Stream, StreamChunk
from helix_django.orm import retry_transient, sync_to_async
from helix_django.streams.base import (
    ENDED,
    FAILED,
    PAUSED,
    BaseStreamManager,
    Chunk,
    StoredChunk,
    StreamInfo,
    raise_connection_error,
)
from helix_django.streams.broadcast import attach_broadcast
from helix_django.streams.database._append_queue import AppendQueue
from helix_django.streams.database._group_commit import GroupCommit
from helix_django.streams.database._writes import DatabaseStreamWrites, claim_sql, encode, info_of
from helix_django.streams.tail import TailCache
from helix_django.streams.transactions import TransactionalWrites, WrittenInTransaction
from helix_django.streams.window import window_options

logger = logging.getLogger(__name__)


class DatabaseStreamManager(DatabaseStreamWrites, BaseStreamManager):
    """Stores streams through the Django ORM's connection (``OPTIONS["DATABASE"]``, default the router's)."""

    supports_pubsub = True
    is_persistent = True
    is_multi_process = True

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        super().__init__(alias, options)
        self.using = options.get("DATABASE") or router.db_for_write(StreamChunk)
        self._chunk_table = StreamChunk._meta.db_table
        self._stream_table = Stream._meta.db_table
        self._claim_sql = claim_sql(self._stream_table)
        self._opening_claim_sql = claim_sql(self._stream_table, is_opening=True)
        self.tail = TailCache(
            max_chunks=int(options.get("TAIL_CHUNKS", 256)), ttl_seconds=float(options.get("TAIL_SECONDS", 5.0))
        )
        """Recent chunks this process appended, served to live readers without a query (:mod:`..tail`)."""
        self.group = GroupCommit(
            self.using,
            chunk_table=self._chunk_table,
            stream_table=self._stream_table,
            encode=encode,
            info_of=info_of,
            known=self.tail.info,
            inline=bool(options.get("INLINE_WRITES", True)),
        )
        """How appends are committed: on the loop for SQLite where that never waits (:mod:`._group_commit`)."""
        self.appends = AppendQueue(self, window_options(options))
        """Appends queued for the next group commit, per event loop (:mod:`._append_queue`)."""
        self.transactions = DatabaseTransactions(self)
        attach_broadcast(self, forget=self.tail.forget, forget_all=self.tail.clear)

    # --- reads on the ORM's thread (its writes: _writes.py) ---------------------------

    def _info_sync(self, stream_id: str) -> StreamInfo | None:
        return self._select_info(stream_id)

    def _read_sync(self, stream_id: str, after: int, limit: int) -> tuple[list[StoredChunk], StreamInfo | None]:
        info = self._info_sync(stream_id)
        if info is None or info.head_sequence <= after:
            return [], info
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT sequence, payload FROM {self._chunk_table} "  # noqa: S608
                "WHERE stream_id = %s AND sequence > %s AND sequence <= %s ORDER BY sequence LIMIT %s",
                [stream_id, after, info.head_sequence, limit],
            )
            rows = cursor.fetchall()
        return [(seq, json.loads(payload) if isinstance(payload, str) else payload) for seq, payload in rows], info

    # --- async API -----------------------------------------------------------------------

    async def _call(self, what: str, fn: Any, *args: Any, retry: bool = False) -> Any:
        # A run's writes (``retry``) ride out a short database outage: each is one transaction.
        try:
            if retry:
                return await retry_transient(what, sync_to_async(fn, thread_sensitive=True), *args)
            return await sync_to_async(fn, thread_sensitive=True)(*args)
        except StreamFenceError:
            raise
        except DatabaseError as exc:
            raise raise_connection_error(exc, what) from exc

    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int, is_opening: bool = False) -> StreamInfo:
        return (await self._claim(stream_id, run_id, epoch, (), is_opening=is_opening))[0]

    async def claim_and_append(
        self, stream_id: str, run_id: str, *, epoch: int, chunks: Sequence[Chunk]
    ) -> tuple[StreamInfo, list[int]]:
        """Claim and store the first ``chunks`` in one transaction and one thread hop (see the base class)."""
        return await self._claim(stream_id, run_id, epoch, chunks, is_opening=True)

    async def _claim(
        self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk], *, is_opening: bool
    ) -> tuple[StreamInfo, list[int]]:
        self.tail.forget(stream_id)
        # A write in flight: another process's notice heard before the reply keeps it out of the tail.
        write = self.tail.begin_write(stream_id)
        try:
            token = await self._call(
                "claim", self._claim_and_append_sync, stream_id, run_id, epoch, list(chunks), is_opening
            )
        except BaseException:
            self.tail.end_write(stream_id, write)
            raise
        return self._claimed(stream_id, token, write)

    def _claimed(self, stream_id: str, token: Any, write: int | None = None) -> tuple[StreamInfo, list[int]]:
        """Record the committed claim's chunks in the tail and wake readers (:meth:`DatabaseTransactions.claimed`).

        ``write``: the :meth:`TailCache.begin_write` token of a claim committed off the loop.
        """
        claimed, sequences, info, payloads = token
        if write is not None and sequences:
            self.tail.end_write(stream_id, write, info, sequences[0], payloads)
        elif write is not None:
            self.tail.end_write(stream_id, write)  # drops the entry
            self.tail.forget(stream_id)
        else:
            self.tail.forget(stream_id)
            if sequences:
                self.tail.extend(stream_id, info, sequences[0], payloads)
        self.notifier.notify(stream_id)
        return claimed, sequences

    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        """Store ``chunks`` (see the base class); concurrent appends share one transaction (group commit).

        Appends that arrive while a commit is in flight wait for the next one, which takes
        them all: under load, one thread hop and one transaction serve many streams.
        """
        return await self.append_soon(stream_id, run_id, chunks)

    def append_soon(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Queue ``chunks`` for the next group commit; return the future of their sequences (no task)."""
        return self.appends.submit(stream_id, run_id, chunks)

    async def _set_status(self, stream_id: str, run_id: str, status: str, **fields: Any) -> StreamInfo:
        self.tail.forget(stream_id)
        info = await self._call(status, self._status_sync, stream_id, run_id, status, fields, retry=True)
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id)
        return info

    async def end_stream(self, stream_id: str, run_id: str, *, end_status: str = "completed") -> StreamInfo:
        return await self._set_status(stream_id, run_id, ENDED, end_status=end_status)

    async def fail_stream(self, stream_id: str, run_id: str, error: dict[str, Any]) -> StreamInfo:
        return await self._set_status(stream_id, run_id, FAILED, error=error)

    async def pause_stream(self, stream_id: str, run_id: str) -> StreamInfo:
        return await self._set_status(stream_id, run_id, PAUSED)

    @property
    def wakes_other_processes(self) -> bool:
        """Only with a broadcaster attached: a channel layer that spans processes (see the broadcast module)."""
        return self.notifier.remote is not None

    @property
    def reads_are_current(self) -> bool:
        """False while other processes may write (a broadcaster is attached): a tail hit's info is old then."""
        return self.notifier.remote is None or not self.tail.is_enabled

    async def purge_stream(self, stream_id: str) -> None:
        self.tail.forget(stream_id)
        await self._call("purge", self._purge_sync, stream_id)
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id)

    async def aclose(self) -> None:
        """Close the inline SQLite connections (:mod:`._group_commit`)."""
        self.close()

    def close(self) -> None:
        """Close the connections this manager opened itself (the inline SQLite ones); callable from any thread."""
        if self.group.inline is not None:
            self.group.inline.close()

    async def get_info(self, stream_id: str) -> StreamInfo | None:
        return await self._call("info", self._info_sync, stream_id)

    async def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        # A caught-up reader is answered from the tail while no other process can write the
        # stream unannounced: no broadcaster, or this loop's channel is in the broadcast group (another
        # process's write drops the entry before its message wakes our readers).
        remote = self.notifier.remote
        hit = self.tail.read(stream_id, after, limit, allow_empty=remote is None or remote.hears(stream_id))
        if hit is not None:
            return hit
        return await self._call("read", self._read_sync, stream_id, after, limit)


class DatabaseTransactions(TransactionalWrites):
    """The database manager's writes inside a caller's transaction on its database (see the base class)."""

    def __init__(self, manager: DatabaseStreamManager) -> None:
        self.manager = manager
        self.database = manager.using

    def claim(self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk]) -> Any:
        """Claim and insert ``chunks`` inside the caller's transaction (see the base class)."""
        self.manager.tail.forget(stream_id)
        return self.manager._claim_and_append_sync(stream_id, run_id, epoch, list(chunks))

    def claimed(self, stream_id: str, token: Any) -> tuple[StreamInfo, list[int]]:
        """Record the committed claim's chunks in the tail and wake readers (see the base class)."""
        return self.manager._claimed(stream_id, token)

    def get_info(self, stream_id: str) -> StreamInfo | None:
        """Read the stream's info on the ORM's thread (see the base class)."""
        try:
            return self.manager._info_sync(stream_id)
        except DatabaseError as exc:
            raise raise_connection_error(exc, "info") from exc

    def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> WrittenInTransaction:
        """Store ``chunks`` inside the caller's transaction (see the base class)."""
        if not chunks:
            return WrittenInTransaction([], None, [])
        return WrittenInTransaction(*self.manager._append_locked(stream_id, run_id, chunks))

    def end(self, stream_id: str, run_id: str, *, end_status: str) -> WrittenInTransaction:
        """End the stream inside the caller's transaction (see the base class)."""
        info = self.manager._status_sync(stream_id, run_id, ENDED, {"end_status": end_status})
        return WrittenInTransaction([], info, [])

    def wrote(self, stream_id: str, writes: Sequence[WrittenInTransaction]) -> None:
        """Record the committed chunks in the tail with the stream's final info, wake readers, then drop them.

        The readers woken (at the head) are served the last chunks and the status the same
        transaction committed without a query (:mod:`..tail`); the entry is dropped right
        after they ran, as after any status change: an ended stream is read from the
        database, so a purge by another process leaves nothing behind here.
        """
        tail = self.manager.tail
        stored = [write for write in writes if write.payloads]
        final = next((write.info for write in reversed(writes) if write.info is not None), None)
        if not stored or final is None:
            tail.forget(stream_id)
        for number, write in enumerate(stored, start=1):
            assert write.info is not None  # a write that stored chunks knows the stream it left
            info = final if number == len(stored) and final is not None else write.info
            tail.extend(stream_id, info, write.sequences[0], write.payloads)
        self.manager.notifier.notify(stream_id)
        if stored:  # after the woken readers, which the loop runs first (FIFO)
            asyncio.get_running_loop().call_soon(tail.forget, stream_id)
