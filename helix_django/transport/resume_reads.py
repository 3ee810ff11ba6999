"""What a resume of the chat route reads from the database, in the hop that authenticates it.

A resume needs the caller's session, its current run and, for the response filter, the
tool calls of the session's committed messages (002, "Tool results for a call in an
earlier message"). :func:`read_resume_state` reads all three in the ORM's thread, inside
the host's middleware right after authentication (:func:`helix_django.transport.chat_caller.identify`),
so opening a resume makes one trip to that thread before the stream is read, where it made
five (authentication, the ownership read, the session and run reads, the messages).

The reads are bare SQL (:mod:`helix_django.store.reads`: the ORM's query building cost
several times each query). The messages are read as their stored JSON text, and only a
message whose text holds a ``toolCallId`` is decoded: the rest of the history costs no
JSON parse.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Sequence
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from helix_django.access.ownership import Owner
from helix_django.errors import SessionNotFoundError
from helix_django.ids import is_valid_session_id
from helix_django.models import ChatSession, Message, Run
from helix_django.store.reads import read_session
from helix_django.transport.replay import tool_call_ids, tool_names_of

#: Text every stored tool part holds (a part without it is no tool call: :func:`~.replay.tool_call_ids`).
_TOOL_CALL_KEY = '"toolCallId"'


@dataclasses.dataclass(frozen=True)
class ResumeState:
    """The session, run and committed tool calls one resume is planned from."""

    session: ChatSession
    run: Run | None
    """The session's current run (None: no run yet)."""
    tool_names: dict[str, str]
    """``{tool call id: tool name}`` over the committed messages, later messages winning."""
    held_tool_calls: dict[str, list[str]]
    """``{UI message id: its tool call ids}`` of the committed messages that have tool parts."""

    def held_tool_call_ids(self, message_id: str | None) -> list[str]:
        """Return the tool call ids of the committed message ``message_id`` ([] when it has none)."""
        return list(self.held_tool_calls.get(message_id or "", ()))


def read_resume_state(session_id: str, owner: Owner | None, *, session: ChatSession | None = None) -> ResumeState:
    """Return the state of ``session_id`` for a resume by ``owner`` (synchronous: the ORM's thread).

    ``owner`` None skips the ownership check (a re-read of a session already checked);
    ``session`` is a row the caller already read. Raises SessionNotFoundError (404) for an
    invalid id, a missing session or another owner's (never 403, :mod:`~helix_django.access.ownership`).
    """
    if session is not None:
        run = _read_run(session.current_run_id) if session.current_run_id else None
    elif is_valid_session_id(session_id):
        session, run = _read_session_and_run(session_id)
    if session is None or (owner is not None and not owner.owns(session)):
        raise SessionNotFoundError()
    names, held = _committed_tool_calls(session.pk)
    return ResumeState(session=session, run=run, tool_names=names, held_tool_calls=held)


class _Columns:
    """The concrete columns of a model as one statement reads them, with each column's converters."""

    def __init__(self, model: type[Model], table: str, connection: BaseDatabaseWrapper) -> None:
        self.model = model
        fields = model._meta.concrete_fields
        self.names = [f.attname for f in fields]
        self.pk_index = self.names.index(model._meta.pk.attname)
        self.sql = ", ".join(f"{table}.{connection.ops.quote_name(f.column or f.attname)}" for f in fields)
        self.converters = []
        for index, field in enumerate(fields):
            col = field.get_col(table)
            found = connection.ops.get_db_converters(col) + field.get_db_converters(connection)
            if found:
                self.converters.append((index, col, found))

    def load(self, alias: str, connection: BaseDatabaseWrapper, values: Sequence[Any]) -> Any:
        """Return the model instance of ``values`` (one per column, in order), as the ORM loads it."""
        values = list(values)
        for index, col, converters in self.converters:
            value = values[index]
            for converter in converters:
                value = converter(value, col, connection)
            values[index] = value
        return self.model.from_db(alias, self.names, values)


class _SessionAndRun:
    """``SELECT`` of a session row joined with its current run's (built once per connection)."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.session = _Columns(ChatSession, "s", connection)
        self.run = _Columns(Run, "r", connection)
        self.sql = (
            f"SELECT {self.session.sql}, {self.run.sql} FROM {ChatSession._meta.db_table} s "  # noqa: S608
            f"LEFT JOIN {Run._meta.db_table} r ON r.id = s.current_run_id WHERE s.id = %s"
        )


_statements: weakref.WeakKeyDictionary[BaseDatabaseWrapper, _SessionAndRun] = weakref.WeakKeyDictionary()


def _read_session_and_run(session_id: str) -> tuple[ChatSession | None, Run | None]:
    """Return the session row and its current run, read in one statement ((None, None): no such session).

    One query where two cost twice (the ORM's row loading is most of a row's cost); when
    the router puts sessions and runs in different databases, two reads.
    """
    alias = router.db_for_read(ChatSession)
    if router.db_for_read(Run) != alias:
        session = read_session(session_id)
        return session, _read_run(session.current_run_id) if session and session.current_run_id else None
    connection = connections[alias]
    statement = _statements.get(connection)
    if statement is None:
        statement = _statements[connection] = _SessionAndRun(connection)
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, [session_id])
        row = cursor.fetchone()
    if row is None:
        return None, None
    width = len(statement.session.names)
    session = statement.session.load(alias, connection, row[:width])
    run_values = row[width:]
    run = statement.run.load(alias, connection, run_values) if run_values[statement.run.pk_index] is not None else None
    return session, run


def _read_run(run_id: str) -> Run | None:
    sql = f"SELECT * FROM {Run._meta.db_table} WHERE id = %s"  # noqa: S608
    return next(iter(Run.objects.raw(sql, [run_id], using=router.db_for_read(Run))), None)


def _committed_tool_calls(session_id: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Return ``(tool names, tool call ids per message)`` over the committed rows, in position order.

    A UI id held by several committed rows keeps the first row's calls (the ORM's
    ``.first()`` in the model's ordering).
    """
    sql = (
        f"SELECT ui_id, parts FROM {Message._meta.db_table} "  # noqa: S608
        "WHERE session_id = %s AND position IS NOT NULL ORDER BY position"
    )
    names: dict[str, str] = {}
    held: dict[str, list[str]] = {}
    seen: set[str] = set()
    with connections[router.db_for_read(Message)].cursor() as cursor:
        cursor.execute(sql, [session_id])
        rows = cursor.fetchall()
    for ui_id, raw in rows:
        is_first = ui_id not in seen
        seen.add(ui_id)
        parts = _tool_parts(raw)
        if parts is None:
            continue
        message = {"parts": parts}
        names.update(tool_names_of([message]))
        calls = tool_call_ids(message)
        if calls and is_first:
            held[ui_id] = calls
    return names, held


def _tool_parts(raw: Any) -> list[Any] | None:
    """Return a stored ``parts`` value decoded, or None when it cannot hold a tool call (not decoded)."""
    if isinstance(raw, (str, bytes, bytearray)):
        text = raw.decode() if isinstance(raw, (bytes, bytearray)) else raw
        if _TOOL_CALL_KEY not in text:
            return None
        raw = json.loads(text)
    return raw if isinstance(raw, list) else None
