"""The database stream manager's writes on the ORM's thread: claims, inserts, fenced status changes, purges.

Each method runs on the ORM's thread (the manager's async API hops there, or a caller's
transaction runs it there). Every write is fenced on the claiming run: a write of another
run raises StreamFenceError.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from helix_django.errors import StreamFenceError
from helix_django.models import Stream
from helix_django.streams.database._group_commit import INFO_COLUMNS, chunk_rows
from helix_django.streams.info import ACTIVE, ENDED, FAILED, RUN_ENDED, Chunk, StreamInfo
from helix_django.streams.tail import Kept

#: Compact JSON of a stored chunk; one shared encoder (``json.dumps`` with options builds one per call).
encode = json.JSONEncoder(separators=(",", ":")).encode


def info_of(stream_id: str, row: Sequence[Any]) -> StreamInfo:
    """Return the StreamInfo of a raw ``INFO_COLUMNS`` row (``error`` is JSON text on SQLite)."""
    status, head, owner, epoch, end_status, error = row
    if isinstance(error, str):
        error = json.loads(error)
    return StreamInfo(stream_id, status, head, owner, epoch, end_status, error)


def info_of_model(row: Stream) -> StreamInfo:
    """Return the StreamInfo of a ``Stream`` model instance."""
    return StreamInfo(
        row.stream_id, row.status, row.head_sequence, row.run_id, row.claim_epoch, row.end_status, row.error
    )


def claim_sql(stream_table: str, *, is_opening: bool = False) -> str:
    """Return the claim upsert on ``stream_table`` (:meth:`DatabaseStreamWrites._claim_sync` fills in the values).

    ``is_opening``: a run's first claim, which repeats its own claim only on a stream still
    ``active`` (never one closed for the run before it landed; see ``BaseStreamManager.claim_stream``).
    """
    repeat = "held.run_id = excluded.run_id AND held.claim_epoch = excluded.claim_epoch"
    if is_opening:
        repeat += f" AND held.status = '{ACTIVE}'"
    return (
        f"INSERT INTO {stream_table} AS held "  # noqa: S608 - table name from model meta
        "(stream_id, status, run_id, head_sequence, claim_epoch, end_status, error, created_at, updated_at) "
        "VALUES (%s, %s, %s, 0, %s, '', NULL, %s, %s) ON CONFLICT (stream_id) DO UPDATE SET "
        "status = excluded.status, run_id = excluded.run_id, claim_epoch = excluded.claim_epoch, "
        "end_status = '', error = NULL, updated_at = excluded.updated_at "
        f"WHERE held.run_id = '' OR excluded.claim_epoch > held.claim_epoch OR ({repeat})"
    )


class DatabaseStreamWrites:
    """The sync writes of :class:`~helix_django.streams.database.DatabaseStreamManager` (module docstring)."""

    # Set by DatabaseStreamManager.__init__.
    using: str
    group: Any
    _chunk_table: str
    _stream_table: str
    _claim_sql: str
    _opening_claim_sql: str

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
        return None if row is None else info_of(stream_id, row)

    def _insert(self, stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk]) -> list[int]:
        return self._insert_payloads(stream_id, run_id, head, chunks)[0]

    def _insert_payloads(
        self, stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk]
    ) -> tuple[list[int], list[Kept]]:
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
    ) -> tuple[list[int], StreamInfo, list[Kept]]:
        """Append inside the caller's transaction; return (sequences, committed info, what the tail keeps)."""
        info = self._select_info(stream_id, for_update=True)
        if info is None or info.run_id != run_id:
            raise StreamFenceError(cause="stream_claimed_by_other_run")
        if info.status != ACTIVE:
            raise StreamFenceError(cause="stream_not_active")
        return self._insert_after(info, run_id, chunks)

    def _insert_after(
        self, info: StreamInfo, run_id: str, chunks: Sequence[Chunk]
    ) -> tuple[list[int], StreamInfo, list[Kept]]:
        """Insert ``chunks`` after ``info``'s head and move the head (the caller locked the row, checked the fence)."""
        sequences, payloads = self._insert_payloads(info.stream_id, run_id, info.head_sequence, chunks)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"UPDATE {self._stream_table} SET head_sequence = %s WHERE stream_id = %s",  # noqa: S608
                [sequences[-1], info.stream_id],
            )
        return sequences, info.with_head(sequences[-1]), payloads

    def _append_many_sync(self, requests: list[tuple[str, str, Sequence[Chunk]]]) -> list[Any]:
        """Group commit on the ORM's thread (:class:`~helix_django.streams.database._group_commit.GroupCommit`)."""
        return self.group.run_sync(requests)

    @staticmethod
    def _rows(
        stream_id: str, run_id: str, head: int, chunks: Sequence[Chunk], rows: list[tuple]
    ) -> tuple[list[int], list[Kept]]:
        """Append the INSERT rows of ``chunks`` (sequences after ``head``) to ``rows``; return (sequences, kept)."""
        return chunk_rows(stream_id, run_id, head, chunks, rows, encode)

    def _claim_sync(self, stream_id: str, run_id: str, epoch: int, *, is_opening: bool = False) -> StreamInfo:
        """Claim with one upsert: insert the row claimed, or take it over if the fence allows.

        A claim takes the stream when nobody holds it, when it repeats the holder's own
        claim (an opening one: only on a stream still active), or when its epoch is higher
        (002, "Superseded runs"); otherwise the upsert changes nothing and StreamFenceError
        (``stale_claim``; ``run_ended`` for an opening claim whose run's stream was closed
        for it) is raised. Racing first claims meet on the primary key: the later one
        compares epochs with the earlier.
        """
        connection = connections[self.using]
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        params: list[Any] = [stream_id, ACTIVE, run_id, epoch, now, now]  # as the backend adapts them
        sql = self._opening_claim_sql if is_opening else self._claim_sql
        if connection.features.can_return_columns_from_insert:  # PostgreSQL, SQLite >= 3.35: one statement
            with connection.cursor() as cursor:
                cursor.execute(f"{sql} RETURNING {INFO_COLUMNS}", params)
                row = cursor.fetchone()
            info = None if row is None else info_of(stream_id, row)
        else:
            with transaction.atomic(using=self.using):
                with connection.cursor() as cursor:
                    cursor.execute(sql, params)
                    taken = cursor.rowcount == 1
                info = self._select_info(stream_id) if taken else None
        if info is None:
            held = self._select_info(stream_id) if is_opening else None  # the refused path only
            closed = held is not None and (held.run_id, held.epoch) == (run_id, epoch)
            raise StreamFenceError(cause=RUN_ENDED if closed else "stale_claim")
        return info

    def _claim_and_append_sync(
        self, stream_id: str, run_id: str, epoch: int, chunks: Sequence[Chunk], is_opening: bool = True
    ) -> tuple[StreamInfo, list[int], StreamInfo, list[Kept]]:
        """Claim (a run's opening unless ``is_opening`` is false) and insert ``chunks`` after the claimed head.

        One transaction. Returns (info at the claim, sequences, info after the chunks, what the tail keeps of them).
        """
        if not chunks:  # a claim alone: one statement, no transaction around it
            claimed = self._claim_sync(stream_id, run_id, epoch, is_opening=is_opening)
            return claimed, [], claimed, []
        with transaction.atomic(using=self.using):
            claimed = self._claim_sync(stream_id, run_id, epoch, is_opening=is_opening)
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
            return info_of(stream_id, row)
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
        return info_of_model(row)

    def _purge_sync(self, stream_id: str) -> None:
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute(f"DELETE FROM {self._chunk_table} WHERE stream_id = %s", [stream_id])  # noqa: S608
            cursor.execute(
                f"UPDATE {self._stream_table} SET status = %s, run_id = '', end_status = '', error = NULL "  # noqa: S608
                "WHERE stream_id = %s",
                [ENDED, stream_id],
            )
