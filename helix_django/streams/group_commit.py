"""The database stream manager's group commit: many streams' appends in one transaction.

A flush of a live run's stream writer is one append; appends queued on one event loop
while a commit is in flight are committed together (:class:`GroupCommit`), with three
statements in all: a locking SELECT of the streams, an ``executemany`` INSERT of the
chunks, an ``executemany`` UPDATE of the heads. A request whose run does not hold the
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

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from asgiref.sync import AsyncToSync
from django.db import connections, transaction

from helix_django.errors import StreamFenceError
from helix_django.streams.base import ACTIVE, Chunk, StreamInfo

Request = tuple[str, str, Sequence[Chunk]]
"""``(stream_id, run_id, chunks)`` of one append."""
#: DB-API placeholder and transaction start of the backends whose appends skip Django's cursor.
RAW_PLACEHOLDERS = {"sqlite": "?", "postgresql": "%s"}
RAW_BEGIN = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}
#: The columns of a StreamInfo after ``stream_id``, in the order ``info_of`` reads them.
INFO_COLUMNS = "status, head_sequence, run_id, claim_epoch, end_status, error"
SQLITE_ENGINE = "django.db.backends.sqlite3"
#: Inline commits between two checkpoints of the WAL (about 4 KiB of WAL each).
CHECKPOINT_EVERY = 500


def chunk_rows(
    stream_id: str,
    run_id: str,
    head: int,
    chunks: Sequence[Chunk],
    rows: list[tuple],
    encode: Callable[[Chunk], str],
) -> tuple[list[int], list[str]]:
    """Append the INSERT rows of ``chunks`` (sequences after ``head``) to ``rows``; return (sequences, payloads)."""
    sequences = list(range(head + 1, head + 1 + len(chunks)))
    payloads = [encode(chunk) for chunk in chunks]
    rows.extend(
        (stream_id, seq, run_id, chunk.get("_attempt", ""), chunk.get("_step", 0), chunk.get("type", ""), payload)
        for seq, chunk, payload in zip(sequences, chunks, payloads, strict=True)
    )
    return sequences, payloads


class GroupCommit:
    """The statements of one group commit, and the ways to run them (see the module docstring).

    ``info_of(stream_id, row)`` builds a StreamInfo from an ``INFO_COLUMNS`` row. A
    result per request, in order: ``(sequences, info after the append, payloads)`` or the
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
        inline: bool = True,
    ) -> None:
        self.using = using
        self.encode = encode
        self.info_of = info_of
        self.stream_table = stream_table
        self.insert_sql = (
            f"INSERT INTO {chunk_table} "  # noqa: S608 - table name from model meta
            "(stream_id, sequence, run_id, attempt_id, step, type, payload) VALUES (%s, %s, %s, %s, %s, %s, %s)"
        )
        self.inline = InlineSqlite(using) if inline else None

    # --- the statements ---------------------------------------------------------------------

    def statements(self, cursor: Any, placeholder: str, requests: Sequence[Request], lock: bool) -> list[Any]:
        """Run the group commit's statements on ``cursor`` (inside the caller's transaction)."""
        results: list[Any] = []
        rows: list[tuple] = []
        infos = self._select_infos(cursor, placeholder, sorted({request[0] for request in requests}), lock=lock)
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
        if rows:
            cursor.executemany(self.insert_sql.replace("%s", placeholder), rows)
            cursor.executemany(
                f"UPDATE {self.stream_table} SET head_sequence = {placeholder} "  # noqa: S608
                f"WHERE stream_id = {placeholder}",
                [(head, stream_id) for stream_id, head in heads.items()],
            )
        return results

    def _select_infos(
        self, cursor: Any, placeholder: str, stream_ids: list[str], *, lock: bool
    ) -> dict[str, StreamInfo]:
        """Read (``lock``: FOR UPDATE) the rows of ``stream_ids``, in id order."""
        out: dict[str, StreamInfo] = {}
        for start in range(0, len(stream_ids), 500):
            part = stream_ids[start : start + 500]
            cursor.execute(
                f"SELECT stream_id, {INFO_COLUMNS} FROM {self.stream_table} "  # noqa: S608
                f"WHERE stream_id IN ({', '.join([placeholder] * len(part))}) ORDER BY stream_id"
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
        return self.inline.run(self.statements, "?", requests, False)

    def run_sync(self, requests: Sequence[Request]) -> list[Any]:
        """Commit on the ORM's thread (the raw DB-API path where possible). Raises Django's DatabaseError."""
        connection = connections[self.using]
        lock = connection.features.has_select_for_update
        placeholder = RAW_PLACEHOLDERS.get(connection.vendor)
        if placeholder is None or connection.in_atomic_block or connection.execute_wrappers:
            placeholder = None
        if placeholder is None or connection.queries_logged:
            with transaction.atomic(using=self.using), connection.cursor() as cursor:
                return self.statements(cursor, "%s", requests, lock)
        connection.ensure_connection()
        with connection.wrap_database_errors:  # driver errors become Django's; the connection is marked
            cursor = connection.connection.cursor()
            try:
                begin = RAW_BEGIN[connection.vendor]
                return _in_transaction(cursor, begin, self.statements, placeholder, requests, lock)
            finally:
                cursor.close()

    def checkpoint_sync(self) -> None:
        """Checkpoint the WAL the inline connection leaves alone (PASSIVE: never waits for readers)."""
        with connections[self.using].cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _in_transaction(cursor: Any, begin: str, statements: Callable[..., list[Any]], *args: Any) -> list[Any]:
    """Run ``statements(cursor, *args)`` between ``begin`` and COMMIT; roll back when anything fails."""
    cursor.execute(begin)
    try:
        results = statements(cursor, *args)
        cursor.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):  # a broken connection is closed by the caller's cleanup
            cursor.execute("ROLLBACK")
        raise
    return results


class InlineSqlite:
    """Per thread, a private sqlite3 connection to ``using``'s file that commits without ever waiting.

    Enabled only when the database is SQLite on a file (not in memory), in WAL mode,
    with ``synchronous`` NORMAL or OFF after the alias's ``init_command``. The connection
    follows the alias's NAME (the test runner swaps it for the test database's).
    """

    def __init__(self, using: str) -> None:
        self.using = using
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.commits = 0
        """Inline commits so far (the manager checkpoints every CHECKPOINT_EVERY)."""

    @property
    def checkpoint_due(self) -> bool:
        """Whether CHECKPOINT_EVERY inline commits happened since the last checkpoint was asked for."""
        return self.commits % CHECKPOINT_EVERY == 0 and self.commits > 0

    def _connection(self) -> sqlite3.Connection | None:
        settings = connections.settings[self.using]
        if settings["ENGINE"] != SQLITE_ENGINE:
            return None
        name = str(settings["NAME"])
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == name:
            return held[1]
        if held is not None and held[1] is not None:
            self._close(held[1])
        try:
            conn = _open(name, settings.get("OPTIONS", {}))
        except sqlite3.Error:
            return None  # not settled (the file is not there yet, a lock): tried again next time
        self._local.held = (name, conn)
        if conn is not None:
            with self._lock:
                self._opened.append(conn)
        return conn

    def run(self, statements: Callable[..., list[Any]], *args: Any) -> list[Any] | None:
        """Run ``statements(cursor, *args)`` in one IMMEDIATE transaction; None when locked, disabled or failed.

        None also while a synchronous caller waits on this loop (``async_to_sync``): its
        thread may hold an open transaction that the append must join, as on the ORM's thread.
        """
        if getattr(AsyncToSync.executors, "current", None) is not None:
            return None
        conn = self._connection()
        if conn is None:
            return None
        cursor = conn.cursor()
        try:
            results = _in_transaction(cursor, "BEGIN IMMEDIATE", statements, *args)
        except sqlite3.Error:
            return None  # locked (another writer), or a failure the ORM's path retries and reports
        finally:
            cursor.close()
        self.commits += 1
        return results

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn in self._opened:
                self._opened.remove(conn)
        conn.close()

    def close(self) -> None:
        """Close every inline connection this writer opened (on any thread)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()


def _open(name: str, options: dict[str, Any]) -> sqlite3.Connection | None:
    """Open the inline connection to ``name``, or return None when commits there could wait or sync.

    The alias's ``init_command`` runs first (its pragmas, as Django's connections have them);
    then the busy timeout is forced back to zero (an ``init_command`` may set one) and the
    connection is refused unless the database is in WAL mode, ``synchronous`` is NORMAL or
    OFF and the locking mode is NORMAL. Raises sqlite3.Error when it cannot be opened now.
    """
    if not name or name == ":memory:" or "mode=memory" in name:
        return None
    # check_same_thread=False: used by one thread (thread-local), closed by close() from any.
    conn = sqlite3.connect(name, timeout=0, isolation_level=None, uri=name.startswith("file:"), check_same_thread=False)
    try:
        for command in str(options.get("init_command") or "").split(";"):
            if command.strip():
                conn.execute(command)
        conn.execute("PRAGMA busy_timeout=0")
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
        locking = conn.execute("PRAGMA locking_mode").fetchone()[0]
        busy = conn.execute("PRAGMA busy_timeout").fetchone()[0]
        if str(journal).lower() != "wal" or int(synchronous) > 1 or str(locking).lower() != "normal" or busy:
            conn.close()
            return None
        conn.execute("PRAGMA wal_autocheckpoint=0")
    except BaseException:
        conn.close()
        raise
    return conn
