"""The reads on a send's path, as bare SQL: the ORM's query building cost ten times the query.

Measured in a tight loop on SQLite: ``ChatSession.objects.filter(pk=..).first()`` 284 us,
``Manager.raw()`` of the same row 84 us, a cursor's ``fetchone()`` 19 us
(docs/performance.md). Rows that become model instances go through ``Manager.raw()``
(Django's own column converters: JSON, datetimes); scalars through a cursor. Reads made
inside a commit use the alias the commit writes to (``router.db_for_write``), so they see
the transaction's own writes and its locks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import connections, router

from helix_django.models import LIVE_STATUSES, ChatSession, Message, Run


def write_alias() -> str:
    """Return the database alias helix's commits write to (``router.db_for_write``)."""
    return router.db_for_write(ChatSession)


def read_session(session_id: str, *, lock: bool = False) -> ChatSession | None:
    """Return the session row, or None.

    ``lock``: inside a commit, lock the row (``FOR UPDATE`` where the database has it; on
    SQLite the IMMEDIATE transaction already holds the write lock) and read it from the
    write alias.
    """
    alias = write_alias() if lock else router.db_for_read(ChatSession)
    suffix = " FOR UPDATE" if lock and connections[alias].features.has_select_for_update else ""
    sql = f"SELECT * FROM {ChatSession._meta.db_table} WHERE id = %s{suffix}"  # noqa: S608
    return next(iter(ChatSession.objects.raw(sql, [session_id], using=alias)), None)


def read_run(run_id: str) -> Run | None:
    """Return the run row read on the write alias (inside a commit), or None."""
    sql = f"SELECT * FROM {Run._meta.db_table} WHERE id = %s"  # noqa: S608
    return next(iter(Run.objects.raw(sql, [run_id], using=write_alias())), None)


def holds_active_message(session_id: str, ui_id: str) -> bool:
    """Whether the session's committed rows ``[0, n)`` hold the UI message ``ui_id``."""
    sql = (
        f"SELECT 1 FROM {Message._meta.db_table} "  # noqa: S608
        "WHERE session_id = %s AND ui_id = %s AND position IS NOT NULL LIMIT 1"
    )
    with connections[router.db_for_read(Message)].cursor() as cursor:
        cursor.execute(sql, [session_id, ui_id])
        return cursor.fetchone() is not None


def live_run_ids(session_id: str) -> list[str]:
    """Return the ids of the session's live runs (inside a commit: the write alias)."""
    statuses = sorted(str(status) for status in LIVE_STATUSES)
    sql = (
        f"SELECT id FROM {Run._meta.db_table} "  # noqa: S608
        f"WHERE session_id = %s AND status IN ({', '.join(['%s'] * len(statuses))})"
    )
    with connections[write_alias()].cursor() as cursor:
        cursor.execute(sql, [session_id, *statuses])
        return [row[0] for row in cursor.fetchall()]


def has_runs(session_id: str) -> bool:
    """Whether any run was ever started in the session (its stream was written at least once)."""
    return Run.objects.using(write_alias()).filter(session_id=session_id).exists()


def active_positions(session_id: str, ui_ids: Sequence[str]) -> dict[str, int]:
    """Return ``{ui_id: position}`` of the session's active rows among ``ui_ids`` (inside a commit).

    An id held by several active rows maps to the last of them, whatever the query plan
    (the rows are read in position order, as the model's ordering had them).
    """
    if not ui_ids:
        return {}
    sql = (
        f"SELECT ui_id, position FROM {Message._meta.db_table} "  # noqa: S608
        f"WHERE session_id = %s AND position IS NOT NULL AND ui_id IN ({', '.join(['%s'] * len(ui_ids))}) "
        "ORDER BY position"
    )
    with connections[write_alias()].cursor() as cursor:
        cursor.execute(sql, [session_id, *ui_ids])
        return dict(cursor.fetchall())


def recent_runs(session_id: str, statuses: frozenset[str], *, continuable: bool, limit: int) -> list[Run]:
    """Return up to ``limit`` of the session's runs in ``statuses`` whose ``is_continuation_valid``
    is ``continuable``, newest first (checked by a ``run_started`` receiver on every send)."""
    names = sorted(str(status) for status in statuses)
    sql = (
        f"SELECT * FROM {Run._meta.db_table} "  # noqa: S608
        f"WHERE session_id = %s AND status IN ({', '.join(['%s'] * len(names))}) AND is_continuation_valid = %s "
        "ORDER BY created_at DESC LIMIT %s"
    )
    return list(Run.objects.raw(sql, [session_id, *names, continuable, limit]))


class Row(NamedTuple):
    """One committed message row (no model instance: the snapshot and a run's context read many)."""

    position: int
    ui_id: str
    role: str
    parts: list[dict[str, Any]]
    metadata: dict[str, Any]
    checkpoint_id: int

    def ui_message(self) -> dict[str, Any]:
        """Return the AI SDK UIMessage ``{id, role, parts, metadata}`` of this row."""
        return {"id": self.ui_id, "role": self.role, "parts": self.parts, "metadata": self.metadata}


def read_rows(session_id: str, *, before: int | None = None, using: str | None = None) -> list[Row]:
    """Return the session's committed rows (positions ``< before`` when given) in order, JSON decoded.

    Read where the router reads messages, or from ``using`` (inside a transaction there).

    One indexed SELECT with the driver's cursor: at 1 000 messages the ORM's per-row
    conversion costs more than the query itself.
    """
    sql = (
        f"SELECT position, ui_id, role, parts, metadata, checkpoint_id FROM {Message._meta.db_table} "  # noqa: S608
        "WHERE session_id = %s AND position IS NOT NULL"
    )
    params: list[Any] = [session_id]
    if before is not None:
        sql += " AND position < %s"
        params.append(before)
    with connections[using or router.db_for_read(Message)].cursor() as cursor:
        cursor.execute(sql + " ORDER BY position", params)
        return [
            Row(position, ui_id, role, _decoded(parts), _decoded(metadata), checkpoint_id)
            for position, ui_id, role, parts, metadata, checkpoint_id in cursor.fetchall()
        ]


def _decoded(value: Any) -> Any:
    # SQLite returns JSON columns as text; PostgreSQL's driver may already decode jsonb.
    return json.loads(value) if isinstance(value, str) else value
