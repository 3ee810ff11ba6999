"""Database stream manager: chunks in the ``StreamChunk`` table, one transaction per flush.

The embedded default (SQLite in WAL mode) and the single-database scale-out on
PostgreSQL. A batch is allocated its sequences and inserted with one ``executemany`` in
one transaction that also checks the run-id fence and moves the head. Readers bound
each chunk read by the head read just before it, so chunk and info reads agree without a
read transaction. Readers in this process wake on the notifier; readers in other
processes through the Channels layer (:mod:`helix_django.streams.broadcast`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone

from helix_django.errors import StreamFenceError
from helix_django.models import Stream, StreamChunk
from helix_django.orm import retry_transient, sync_to_async
from helix_django.streams.append_queue import AppendQueue
from helix_django.streams.base import (
    ACTIVE,
    ENDED,
    FAILED,
    PAUSED,
    BaseStreamManager,
    Chunk,
    StoredChunk,
    StreamInfo,
    WrittenInTransaction,
    raise_connection_error,
)
from helix_django.streams.group_commit import INFO_COLUMNS, GroupCommit, chunk_rows
from helix_django.streams.tail import TailCache

logger = logging.getLogger(__name__)

#: Compact JSON of a stored chunk; one shared encoder (``json.dumps`` with options builds one per call).
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _info_of(stream_id: str, row: Sequence[Any]) -> StreamInfo:
    """Return the StreamInfo of a raw ``INFO_COLUMNS`` row (``error`` is JSON text on SQLite)."""
    status, head, owner, epoch, end_status, error = row
    if isinstance(error, str):
        error = json.loads(error)
    return StreamInfo(stream_id, status, head, owner, epoch, end_status, error)


def _info(row: Stream) -> StreamInfo:
    return StreamInfo(
        row.stream_id, row.status, row.head_sequence, row.run_id, row.claim_epoch, row.end_status, row.error
    )


class DatabaseStreamManager(BaseStreamManager):
    """Stores streams through the Django ORM's connection (``OPTIONS["DATABASE"]``, default the router's)."""

    supports_pubsub = True
    is_persistent = True
    is_multi_process = True

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        super().__init__(alias, options)
        self.using = options.get("DATABASE") or router.db_for_write(StreamChunk)
        self._chunk_table = StreamChunk._meta.db_table
        self._stream_table = Stream._meta.db_table
        self._claim_sql = (
            f"INSERT INTO {self._stream_table} AS held "  # noqa: S608 - table name from model meta
            "(stream_id, status, run_id, head_sequence, claim_epoch, end_status, error, created_at, updated_at) "
            "VALUES (%s, %s, %s, 0, %s, '', NULL, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
            "status = excluded.status, run_id = excluded.run_id, claim_epoch = excluded.claim_epoch, "
            "end_status = '', error = NULL, updated_at = excluded.updated_at "
            "WHERE held.run_id = '' OR excluded.claim_epoch > held.claim_epoch "
            "OR (held.run_id = excluded.run_id AND held.claim_epoch = excluded.claim_epoch)"
        )
        self.group = GroupCommit(
            self.using,
            chunk_table=self._chunk_table,
            stream_table=self._stream_table,
            encode=_encode,
            info_of=_info_of,
            inline=bool(options.get("INLINE_WRITES", True)),
        )
        """How appends are committed: on the loop for SQLite where that never waits (:mod:`.group_commit`)."""
        self.tail = TailCache(
            max_chunks=int(options.get("TAIL_CHUNKS", 256)), ttl_seconds=float(options.get("TAIL_SECONDS", 5.0))
        )
        """Recent chunks this process appended, served to live readers without a query (:mod:`.tail`)."""
        self.appends = AppendQueue(self)
        """Appends queued for the next group commit, per event loop (:mod:`.append_queue`)."""
        from helix_django.streams.broadcast import attach_broadcast

        attach_broadcast(self)

    # --- sync parts (run in the ORM's thread) -------------------------------------------

    def _locked(self, stream_id: str, run_id: str) -> Stream:
        row = Stream.objects.using(self.using).select_for_update().filter(pk=stream_id).first()
        if row is None or row.run_id != run_id:
            raise StreamFenceError(cause="stream_claimed_by_other_run")
        return row

    def _select_info(self, stream_id: str, *, for_update: bool = False) -> StreamInfo | None:
        # Raw SQL on the hot paths (append, read): the ORM's query building and model
        # instantiation cost more than the query itself (docs/performance.md).
        connection = connections[self.using]
        lock = " FOR UPDATE" if for_update and connection.features.has_select_for_update else ""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {INFO_COLUMNS} FROM {self._stream_table} WHERE stream_id = %s{lock}",  # noqa: S608
                [stream_id],
            )
            row = cursor.fetchone()
        return None if row is None else _info_of(stream_id, row)

    def _insert(self, stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk]) -> list[int]:
        return self._insert_payloads(stream_id, run_id, head, chunks)[0]

    def _insert_payloads(
        self, stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk]
    ) -> tuple[list[int], list[str]]:
        rows: list[tuple] = []
        sequences, payloads = self._rows(stream_id, run_id, head, chunks, rows)
        with connections[self.using].cursor() as cursor:
            cursor.executemany(self.group.insert_sql, rows)
        return sequences, payloads

    def _append_sync(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        with transaction.atomic(using=self.using):
            return self._append_locked(stream_id, run_id, chunks)[0]

    def _append_locked(
        self, stream_id: str, run_id: str, chunks: Sequence[Chunk]
    ) -> tuple[list[int], StreamInfo, list[str]]:
        """Append inside the caller's transaction; return (sequences, committed info, payloads)."""
        info = self._select_info(stream_id, for_update=True)
        if info is None or info.run_id != run_id:
            raise StreamFenceError(cause="stream_claimed_by_other_run")
        if info.status != ACTIVE:
            raise StreamFenceError(cause="stream_not_active")
        return self._insert_after(info, run_id, chunks)

    def _insert_after(
        self, info: StreamInfo, run_id: str, chunks: Sequence[Chunk]
    ) -> tuple[list[int], StreamInfo, list[str]]:
        """Insert ``chunks`` after ``info``'s head and move the head (the caller locked the row, checked the fence)."""
        sequences, payloads = self._insert_payloads(info.stream_id, run_id, info.head_sequence, chunks)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"UPDATE {self._stream_table} SET head_sequence = %s WHERE stream_id = %s",  # noqa: S608
                [sequences[-1], info.stream_id],
            )
        return sequences, info.with_head(sequences[-1]), payloads

    def _append_many_sync(self, requests: list[tuple[str, str, Sequence[Chunk]]]) -> list[Any]:
        """Group commit on the ORM's thread (:class:`~helix_django.streams.group_commit.GroupCommit`)."""
        return self.group.run_sync(requests)

    @staticmethod
    def _rows(
        stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk], rows: list[tuple]
    ) -> tuple[list[int], list[str]]:
        """Append the INSERT rows of ``chunks`` (sequences after ``head``) to ``rows``; return (sequences, payloads)."""
        return chunk_rows(stream_id, run_id, head, chunks, rows, _encode)

    def _claim_sync(self, stream_id: str, run_id: str, epoch: int) -> StreamInfo:
        """Claim with one upsert: insert the row claimed, or take it over if the fence allows.

        A claim takes the stream when nobody holds it, when it repeats the holder's own
        claim, or when its epoch is higher (002, "Superseded runs"); otherwise the upsert
        changes nothing and StreamFenceError (``stale_claim``) is raised. Racing first
        claims meet on the primary key: the later one compares epochs with the earlier.
        """
        connection = connections[self.using]
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        params: list[Any] = [stream_id, ACTIVE, run_id, epoch, now, now]  # as the backend adapts them
        if connection.features.can_return_columns_from_insert:  # PostgreSQL, SQLite >= 3.35: one statement
            with connection.cursor() as cursor:
                cursor.execute(f"{self._claim_sql} RETURNING {INFO_COLUMNS}", params)
                row = cursor.fetchone()
            info = None if row is None else _info_of(stream_id, row)
        else:
            with transaction.atomic(using=self.using):
                with connection.cursor() as cursor:
                    cursor.execute(self._claim_sql, params)
                    taken = cursor.rowcount == 1
                info = self._select_info(stream_id) if taken else None
        if info is None:
            raise StreamFenceError(cause="stale_claim")
        return info

    def _claim_and_append_sync(
        self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk]
    ) -> tuple[StreamInfo, list[int], StreamInfo, list[str]]:
        """Claim and insert ``chunks`` after the claimed head in one transaction.

        Returns (info at the claim, sequences, info after the chunks, their payloads).
        """
        if not chunks:  # a claim alone: one statement, no transaction around it
            claimed = self._claim_sync(stream_id, run_id, epoch)
            return claimed, [], claimed, []
        with transaction.atomic(using=self.using):
            claimed = self._claim_sync(stream_id, run_id, epoch)
            return claimed, *self._insert_after(claimed, run_id, chunks)

    def _status_sync(self, stream_id: str, run_id: str, status: str, fields: dict[str, Any]) -> StreamInfo:
        connection = connections[self.using]
        if status != FAILED and connection.features.can_return_columns_from_insert:
            # End or pause: one fenced UPDATE .. RETURNING (a run's last write before its next send).
            names = ["status", *fields, "updated_at"]
            values = [status, *fields.values(), connection.ops.adapt_datetimefield_value(timezone.now())]
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {self._stream_table} SET {', '.join(f'{name} = %s' for name in names)} "  # noqa: S608
                    f"WHERE stream_id = %s AND run_id = %s RETURNING {INFO_COLUMNS}",
                    [*values, stream_id, run_id],
                )
                row = cursor.fetchone()
            if row is None:
                raise StreamFenceError(cause="stream_claimed_by_other_run")
            return _info_of(stream_id, row)
        with transaction.atomic(using=self.using):
            row = self._locked(stream_id, run_id)
            if status == FAILED:
                error_chunk = {"type": "error", "errorText": fields["error"].get("error", "error")}
                error_chunk["helixError"] = fields["error"]
                row.head_sequence = self._insert(stream_id, run_id, row.head_sequence, [error_chunk])[-1]
            row.status = status
            for name, value in fields.items():
                setattr(row, name, value)
            row.save(using=self.using)
        return _info(row)

    def _purge_sync(self, stream_id: str) -> None:
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute(f"DELETE FROM {self._chunk_table} WHERE stream_id = %s", [stream_id])  # noqa: S608
            cursor.execute(
                f"UPDATE {self._stream_table} SET status = %s, run_id = '', end_status = '', error = NULL "  # noqa: S608
                "WHERE stream_id = %s",
                [ENDED, stream_id],
            )

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

    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int) -> StreamInfo:
        return (await self.claim_and_append(stream_id, run_id, epoch=epoch, chunks=()))[0]

    async def claim_and_append(
        self, stream_id: str, run_id: str, *, epoch: int, chunks: Sequence[Chunk]
    ) -> tuple[StreamInfo, list[int]]:
        """Claim and store the first ``chunks`` in one transaction and one thread hop (see the base class)."""
        self.tail.forget(stream_id)
        token = await self._call("claim", self._claim_and_append_sync, stream_id, run_id, epoch, list(chunks))
        return self.claimed(stream_id, token)

    def joins_transactions_of(self, alias: str) -> bool:
        """Whether this manager writes to ``alias`` (its claims can join a transaction there)."""
        return alias == self.using

    def claim_in_transaction(self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk]) -> Any:
        """Claim and insert ``chunks`` inside the caller's transaction (see the base class)."""
        self.tail.forget(stream_id)
        return self._claim_and_append_sync(stream_id, run_id, epoch, list(chunks))

    def get_info_in_thread(self, stream_id: str) -> StreamInfo | None:
        """Read the stream's info on the ORM's thread (see the base class)."""
        try:
            return self._info_sync(stream_id)
        except DatabaseError as exc:
            raise raise_connection_error(exc, "info") from exc

    def claimed(self, stream_id: str, token: Any) -> tuple[StreamInfo, list[int]]:
        """Record the committed claim's chunks in the tail and wake readers (see the base class)."""
        claimed, sequences, info, payloads = token
        self.tail.forget(stream_id)
        if sequences:
            self.tail.extend(stream_id, info, sequences[0], payloads)
        self.notifier.notify(stream_id)
        return claimed, sequences

    def append_in_transaction(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> WrittenInTransaction:
        """Store ``chunks`` inside the caller's transaction (see the base class)."""
        if not chunks:
            return WrittenInTransaction([], None, [])
        return WrittenInTransaction(*self._append_locked(stream_id, run_id, chunks))

    def end_in_transaction(self, stream_id: str, run_id: str, *, end_status: str) -> WrittenInTransaction:
        """End the stream inside the caller's transaction (see the base class)."""
        return WrittenInTransaction([], self._status_sync(stream_id, run_id, ENDED, {"end_status": end_status}), [])

    def wrote_in_transaction(self, stream_id: str, writes: Sequence[WrittenInTransaction]) -> None:
        """Record the committed chunks in the tail with the stream's final info, wake readers, then drop them.

        The readers woken (at the head) are served the last chunks and the status the same
        transaction committed without a query (:mod:`.tail`); the entry is dropped right
        after they ran, as after any status change: an ended stream is read from the
        database, so a purge by another process leaves nothing behind here.
        """
        stored = [write for write in writes if write.payloads]
        final = next((write.info for write in reversed(writes) if write.info is not None), None)
        if not stored or final is None:
            self.tail.forget(stream_id)
        for number, write in enumerate(stored, start=1):
            assert write.info is not None  # a write that stored chunks knows the stream it left
            info = final if number == len(stored) else write.info
            self.tail.extend(stream_id, info, write.sequences[0], write.payloads)
        self.notifier.notify(stream_id)
        if stored:  # after the woken readers, which the loop runs first (FIFO)
            asyncio.get_running_loop().call_soon(self.tail.forget, stream_id)

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
    def reads_are_current(self) -> bool:
        """False while other processes may write (a broadcaster is attached): a tail hit's info is old then."""
        return self.notifier.remote is None or not self.tail.is_enabled

    async def purge_stream(self, stream_id: str) -> None:
        self.tail.forget(stream_id)
        await self._call("purge", self._purge_sync, stream_id)
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id)

    async def aclose(self) -> None:
        """Close the inline SQLite connections (:mod:`.group_commit`)."""
        self.close_local_connections()

    def close_local_connections(self) -> None:
        """Close the connections this manager opened itself (the inline SQLite ones); callable from any thread."""
        if self.group.inline is not None:
            self.group.inline.close()

    async def get_info(self, stream_id: str) -> StreamInfo | None:
        return await self._call("info", self._info_sync, stream_id)

    async def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        # A caught-up reader may be answered from the tail only while no cross-process
        # broadcaster is attached: with one, other processes' writes wake us and must be read.
        hit = self.tail.read(stream_id, after, limit, allow_empty=self.notifier.remote is None)
        if hit is not None:
            return hit
        return await self._call("read", self._read_sync, stream_id, after, limit)
