"""The database stream manager's group commit: many streams' appends in one transaction.

A flush of a live run's stream writer is one append; appends queued on one event loop
while a commit is in flight are committed together (:class:`GroupCommit`), with three
statements in all: a locking SELECT of the streams, an INSERT of the chunks, an UPDATE of
the heads. On PostgreSQL the INSERT and the UPDATE are one statement each, their rows
passed as one array per column (``unnest``): Django's psycopg connections bind parameters
on the client and prepare nothing, so an ``executemany`` made PostgreSQL parse and plan
every row anew, 160-195 us of its CPU per chunk against 48 us (docs/performance.md). Elsewhere
they are ``executemany`` (sqlite3 reuses the statement). A request whose run does not hold the
stream's claim (or whose stream is not active) fails alone and writes nothing; a database
error fails the whole batch.

Where the statements run (docs/performance.md, "Per-delta cost"):

- **on the event loop, SQLite** (:class:`InlineSqlite`; ``OPTIONS["INLINE_WRITES"]``, default
  True): a private connection to the same file that never waits: it has a zero busy
  timeout (whatever the alias's ``init_command`` sets) and never checkpoints
  (``wal_autocheckpoint=0``; checkpoints run on the ORM's thread, see
  :attr:`InlineSqlite.checkpoint_due`). Only for a WAL database whose commits do not
  sync (``synchronous`` NORMAL or OFF, the embedded default), so a commit is a write to
  the page cache. When the database is locked, or anything else fails, the batch goes
  the next way (nothing of it was stored), and so does every append made while a
  synchronous caller waits on the loop (``async_to_sync``: it may hold a transaction the
  append joins). This saves the thread hop per flush, which cost twice the transaction;
- **on the ORM's thread, SQLite and PostgreSQL**: the DB-API connection behind Django's
  connection, in one explicit transaction, skipping Django's cursor wrapper and
  ``atomic`` (three times the cost of the statements). Used when no ``execute_wrapper``
  is installed, queries are not logged (``DEBUG``) and no transaction of the caller is
  open;
- otherwise the same statements through Django's cursor in ``transaction.atomic``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections, transaction

from helix_django.errors import StreamFenceError
from helix_django.streams.database._inline_sqlite import SQLITE_ENGINE, InlineSqlite, in_transaction
from helix_django.streams.info import ACTIVE, Chunk, StreamInfo
from helix_django.streams.tail import Kept, stored_form

Request = tuple[str, str, Sequence[Chunk]]
"""``(stream_id, run_id, chunks)`` of one append."""
#: DB-API placeholder and transaction start of the backends whose appends skip Django's cursor.
RAW_PLACEHOLDERS = {"sqlite": "?", "postgresql": "%s"}
RAW_BEGIN = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}
#: The columns of a StreamInfo after ``stream_id``, in the order ``info_of`` reads them.
INFO_COLUMNS = "status, head_sequence, run_id, claim_epoch, end_status, error"


def chunk_rows(
    stream_id: str,
    run_id: str,
    head: int,
    chunks: Sequence[Chunk],
    rows: list[tuple],
    encode: Callable[[Chunk], str],
) -> tuple[list[int], list[Kept]]:
    """Append the INSERT rows of ``chunks`` (sequences after ``head``) to ``rows``; return (sequences, kept).

    ``kept``: what the tail cache keeps of each chunk (:func:`~..tail.stored_form`: each is encoded once).
    """
    sequences = list(range(head + 1, head + 1 + len(chunks)))
    kept: list[Kept] = []
    for seq, chunk in zip(sequences, chunks, strict=True):
        payload, keep = stored_form(chunk, encode)
        kept.append(keep)
        rows.append(
            (stream_id, seq, run_id, chunk.get("_attempt", ""), chunk.get("_step", 0), chunk.get("type", ""), payload)
        )
    return sequences, kept


class StaleInfo(Exception):
    """A stream row changed since this process last committed it: the batch is run again, reading the rows."""


class GroupCommit:
    """The statements of one group commit, and the ways to run them (see the module docstring).

    ``info_of(stream_id, row)`` builds a StreamInfo from an ``INFO_COLUMNS`` row. A
    result per request, in order: ``(sequences, info after the append, kept)`` (what the tail keeps) or the
    StreamFenceError of that request.
    """

    def __init__(
        self,
        using: str,
        *,
        chunk_table: str,
        stream_table: str,
        encode: Callable[[Chunk], str],
        info_of: Callable[[str, Sequence[Any]], StreamInfo],
        known: Callable[[str], StreamInfo | None] | None = None,
        inline: bool = True,
    ) -> None:
        self.using = using
        self.known = known
        """The info of a stream as this process last committed it, if it holds one (the tail cache's)."""
        self.encode = encode
        self.info_of = info_of
        self.stream_table = stream_table
        insert = f"INSERT INTO {chunk_table} (stream_id, sequence, run_id, attempt_id, step, type, payload)"  # noqa: S608 - table name from model meta
        self.insert_sql = f"{insert} VALUES (%s, %s, %s, %s, %s, %s, %s)"
        self.insert_arrays_sql = (
            f"{insert} SELECT * FROM unnest("  # noqa: S608
            "%s::text[], %s::bigint[], %s::text[], %s::text[], %s::integer[], %s::text[], %s::jsonb[])"
        )
        self.inline = InlineSqlite(using) if inline else None
        self._sql: dict[tuple[str, str], str] = {}
        """The statements with each backend's placeholder, made once."""

    # --- the statements ---------------------------------------------------------------------

    def statements(
        self, cursor: Any, placeholder: str, requests: Sequence[Request], lock: bool, use_known: bool = True
    ) -> list[Any]:
        """Run the group commit's statements on ``cursor`` (inside the caller's transaction).

        When every stream of the batch has a committed info this process knows
        (``known``, the tail cache's) and every request is that claim's run, the
        stream rows are not read: each head moves by a compare-and-set UPDATE (run,
        epoch, ``active``, old head) before the chunks are inserted, and raises
        :class:`StaleInfo` when a row changed since (the caller rolls back and runs the
        batch again with ``use_known=False``, which reads the rows first, locked).
        Streams are locked in the same order on both paths, code-point order (PostgreSQL:
        no deadlock between two processes' commits; :meth:`_select_infos`).
        """
        stream_ids = sorted({request[0] for request in requests})
        known = self._known_infos(stream_ids, requests) if use_known else None
        infos = known if known is not None else self._select_infos(cursor, placeholder, stream_ids, lock=lock)
        before = dict(known) if known is not None else {}  # the infos the compare-and-set expects
        results: list[Any] = []
        rows: list[tuple] = []
        heads: dict[str, int] = {}
        for stream_id, run_id, chunks in requests:
            info = infos.get(stream_id)
            if info is None or info.run_id != run_id:
                results.append(StreamFenceError(cause="stream_claimed_by_other_run"))
                continue
            if info.status != ACTIVE:
                results.append(StreamFenceError(cause="stream_not_active"))
                continue
            sequences, payloads = chunk_rows(stream_id, run_id, info.head_sequence, chunks, rows, self.encode)
            info = infos[stream_id] = info.with_head(sequences[-1])
            heads[stream_id] = sequences[-1]
            results.append((sequences, info, payloads))
        if not rows:
            return results
        moved = [stream_id for stream_id in stream_ids if stream_id in heads]  # in id order: the lock order
        arrays = connections[self.using].vendor == "postgresql"
        if known is not None:
            moves = [
                (heads[old.stream_id], old.stream_id, old.run_id, old.epoch, ACTIVE, old.head_sequence)
                for old in (before[stream_id] for stream_id in moved)
            ]
            self._execute(cursor, placeholder, "compare", moves, arrays)
            if cursor.rowcount != len(moves):
                raise StaleInfo()
        self._execute(cursor, placeholder, "insert", rows, arrays)
        if known is None:
            self._execute(cursor, placeholder, "move", [(heads[sid], sid) for sid in moved], arrays)
        return results

    def _execute(self, cursor: Any, placeholder: str, statement: str, rows: list[tuple], arrays: bool) -> None:
        """Run ``statement`` (``insert``, ``compare`` or ``move``) for ``rows``: one statement over column
        arrays (``arrays``: PostgreSQL), else ``executemany``."""
        if arrays:
            cursor.execute(self._array_sql(statement), [list(column) for column in zip(*rows, strict=True)])
        elif statement == "insert":
            cursor.executemany(self._insert_sql(placeholder), rows)
        else:
            cursor.executemany(self._move_head_sql(placeholder, compare=statement == "compare"), rows)

    def _array_sql(self, statement: str) -> str:
        """PostgreSQL's form of ``statement``, its rows as column arrays.

        The UPDATEs join the streams to the arrays, which hold them in id order; the
        planner's nested loop over the arrays takes the rows' locks in that order (the
        order :meth:`_select_infos` locks in), and a plan that did not would at worst meet
        a deadlock, which PostgreSQL breaks by failing one batch (retried, :mod:`._append_queue`).
        """
        if statement == "insert":
            return self.insert_arrays_sql
        key = ("arrays", statement)
        sql = self._sql.get(key)
        if sql is None:
            if statement == "compare":
                columns = "%s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::text[], %s::bigint[]"
                names = "head, stream_id, run_id, epoch, status, old_head"
                match = (
                    " AND s.run_id = v.run_id AND s.claim_epoch = v.epoch"
                    " AND s.status = v.status AND s.head_sequence = v.old_head"
                )
            else:
                columns, names, match = "%s::bigint[], %s::text[]", "head, stream_id", ""
            sql = self._sql[key] = (
                f"UPDATE {self.stream_table} AS s SET head_sequence = v.head "  # noqa: S608
                f"FROM unnest({columns}) AS v({names}) WHERE s.stream_id = v.stream_id{match}"
            )
        return sql

    def _known_infos(self, stream_ids: list[str], requests: Sequence[Request]) -> dict[str, StreamInfo] | None:
        """The committed infos of ``stream_ids`` this process holds, or None unless each is known, active and
        claimed by the run of every request for it."""
        if self.known is None:
            return None
        infos: dict[str, StreamInfo] = {}
        for stream_id in stream_ids:
            info = self.known(stream_id)
            if info is None or info.status != ACTIVE:
                return None
            infos[stream_id] = info
        if any(infos[stream_id].run_id != run_id for stream_id, run_id, _chunks in requests):
            return None
        return infos

    def _insert_sql(self, placeholder: str) -> str:
        """The INSERT of the chunk rows with ``placeholder`` (made once per placeholder)."""
        key = ("insert", placeholder)
        sql = self._sql.get(key)
        if sql is None:
            sql = self._sql[key] = self.insert_sql.replace("%s", placeholder)
        return sql

    def _move_head_sql(self, placeholder: str, *, compare: bool) -> str:
        """The UPDATE moving a stream's head (``compare``: only from the run, epoch, status and head it had)."""
        key = ("compare" if compare else "move", placeholder)
        sql = self._sql.get(key)
        if sql is None:
            sql = self._sql[key] = self._head_sql(placeholder, compare=compare)
        return sql

    def _head_sql(self, placeholder: str, *, compare: bool) -> str:
        where = f"stream_id = {placeholder}"
        if compare:
            where += (
                f" AND run_id = {placeholder} AND claim_epoch = {placeholder}"
                f" AND status = {placeholder} AND head_sequence = {placeholder}"
            )
        return f"UPDATE {self.stream_table} SET head_sequence = {placeholder} WHERE {where}"  # noqa: S608

    def _select_infos(
        self, cursor: Any, placeholder: str, stream_ids: list[str], *, lock: bool
    ) -> dict[str, StreamInfo]:
        """Read (``lock``: FOR UPDATE) the rows of ``stream_ids``, in id order.

        The order is the code-point order ``sorted()`` gives (the compare-and-set path locks
        in it): PostgreSQL sorts by the column's collation unless told ``COLLATE "C"``, and
        under a locale collation (``en_US``) two processes, one on each path, could take
        two streams' locks in opposite orders and deadlock. SQLite's default collation is
        already code-point order.
        """
        out: dict[str, StreamInfo] = {}
        collate = ' COLLATE "C"' if connections[self.using].vendor == "postgresql" else ""
        for start in range(0, len(stream_ids), 500):
            part = stream_ids[start : start + 500]
            cursor.execute(
                f"SELECT stream_id, {INFO_COLUMNS} FROM {self.stream_table} "  # noqa: S608
                f"WHERE stream_id IN ({', '.join([placeholder] * len(part))}) ORDER BY stream_id{collate}"
                + (" FOR UPDATE" if lock else ""),
                part,
            )
            for stream_id, *row in cursor.fetchall():
                out[stream_id] = self.info_of(stream_id, row)
        return out

    # --- where they run ---------------------------------------------------------------------

    @property
    def may_run_inline(self) -> bool:
        """Whether :meth:`run_inline` can commit at all: ``INLINE_WRITES`` is on and the alias is SQLite."""
        return self.inline is not None and connections.settings[self.using]["ENGINE"] == SQLITE_ENGINE

    def run_inline(self, requests: Sequence[Request]) -> list[Any] | None:
        """Commit on the calling (event loop) thread, or return None when this cannot be done now."""
        if self.inline is None:
            return None
        try:
            return self.inline.run(self.statements, "?", requests, False)
        except StaleInfo:
            return self.inline.run(self.statements, "?", requests, False, False)

    def run_sync(self, requests: Sequence[Request]) -> list[Any]:
        """Commit on the ORM's thread (the raw DB-API path where possible). Raises Django's DatabaseError."""
        try:
            return self._run_sync(requests, True)
        except StaleInfo:
            return self._run_sync(requests, False)

    def _run_sync(self, requests: Sequence[Request], use_known: bool) -> list[Any]:
        again = () if use_known else (False,)  # statements' own default first (its 4-argument call)
        connection = connections[self.using]
        lock = connection.features.has_select_for_update
        placeholder = RAW_PLACEHOLDERS.get(connection.vendor)
        if placeholder is None or connection.in_atomic_block or connection.execute_wrappers:
            placeholder = None
        if placeholder is None or connection.queries_logged:
            with transaction.atomic(using=self.using), connection.cursor() as cursor:
                return self.statements(cursor, "%s", requests, lock, *again)
        connection.ensure_connection()
        with connection.wrap_database_errors:  # driver errors become Django's; the connection is marked
            cursor = connection.connection.cursor()
            try:
                begin = RAW_BEGIN[connection.vendor]
                return in_transaction(cursor, begin, self.statements, placeholder, requests, lock, *again)
            finally:
                cursor.close()

    def checkpoint_sync(self) -> None:
        """Checkpoint the WAL the inline connection leaves alone (PASSIVE: never waits for readers)."""
        with connections[self.using].cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
