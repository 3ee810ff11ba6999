"""The SQLite connection the database stream manager commits appends on, on the event loop (:mod:`._group_commit`).

Per thread, a private ``sqlite3`` connection to the alias's file that commits without
ever waiting: zero busy timeout, no checkpoints of its own, and only for a WAL database
whose commits do not sync (docs/performance.md, "Per-delta cost").
"""

from __future__ import annotations

import contextlib
import contextvars
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from asgiref.sync import AsyncToSync
from django.db import connections

SQLITE_ENGINE = "django.db.backends.sqlite3"
#: Inline commits between two checkpoints of the WAL (about 4 KiB of WAL each).
CHECKPOINT_EVERY = 500


def in_transaction(cursor: Any, begin: str, statements: Callable[..., list[Any]], *args: Any) -> list[Any]:
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


def _executors_variable() -> contextvars.ContextVar[Any] | None:
    """The context variable behind asgiref's ``AsyncToSync.executors`` (None where asgiref keeps it otherwise)."""
    variable = getattr(getattr(AsyncToSync.executors, "_storage", None), "_data", None)
    return variable if isinstance(variable, contextvars.ContextVar) else None


_EXECUTORS = _executors_variable()


def sync_caller_waits() -> bool:
    """Whether a synchronous caller waits on the running loop through ``async_to_sync`` (its executor is set).

    A context in which asgiref's local was never set holds no executor: that common case
    is answered from its context variable, without the two exceptions a ``getattr`` on
    the local raises for a name it does not hold.
    """
    if _EXECUTORS is not None and _EXECUTORS.get(None) is None:
        return False
    return getattr(AsyncToSync.executors, "current", None) is not None


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
        if sync_caller_waits():
            return None
        conn = self._connection()
        if conn is None:
            return None
        cursor = conn.cursor()
        try:
            results = in_transaction(cursor, "BEGIN IMMEDIATE", statements, *args)
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
