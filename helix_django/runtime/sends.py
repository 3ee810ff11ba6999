"""A plain send started inside its request's one thread hop (issue 23, "one hop and one transaction").

A chat route's request makes one trip to the ORM's thread anyway (the host's middleware,
authentication, the session read). A plain send (a new user message, ``submit-message``,
no edit) also does its run-start commit in that trip, with the stream claim and the
opening chunks in the same transaction where the stream manager is the database's
(:meth:`~helix_django.runtime.executor.LocalExecutor.prepare_start`); back on the loop,
:meth:`SendsMixin.aopen_send` opens the run (its task, or its hand-off) without another hop.

Whatever this path cannot decide alone goes the way of ``execute()`` (:meth:`SendsMixin.start_send_in_thread`
returns None and changes nothing): a keyed repeat (it attaches to the run of its key,
002), a live run in the session (superseded, retired or refused by ``_start_send``), a
lost compare-and-set, an existing session whose stream head is unknown on the ORM's thread.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.db import IntegrityError

from helix_django import store
from helix_django.errors import AlreadyRunningError, RunStartConflictError, StreamFenceError
from helix_django.models import ChatSession
from helix_django.runtime import guards
from helix_django.runtime import requests as rq
from helix_django.runtime.entries import typed_errors
from helix_django.runtime.handles import Launch, RunHandle
from helix_django.store.reads import write_alias
from helix_django.streams import get_stream_manager

logger = logging.getLogger("helix_django.runtime.executor")


@dataclasses.dataclass(frozen=True)
class StartedSend:
    """A send whose run-start commit landed on the ORM's thread; open it on the loop (:meth:`SendsMixin.aopen_send`)."""

    session: ChatSession
    launch: Launch
    result: store.RunStartResult


def is_plain_send(messages: list[dict[str, Any]], *, trigger: str, message_id: str | None) -> bool:
    """Whether a chat body is a plain send: a trailing user message, ``submit-message``, no edited message."""
    return trigger == "submit-message" and not message_id and bool(messages) and messages[-1].get("role") == "user"


class SendsMixin:
    """Start a plain send in the request's thread hop (module docstring); for LocalExecutor."""

    runner: Any
    prepare_start: Any
    open_started: Any
    _launched: Any

    def start_send_in_thread(
        self,
        session: ChatSession,
        messages: list[dict[str, Any]],
        *,
        request_key: str | None = None,
        stream_sequence: int | None = None,
    ) -> StartedSend | None:
        """Do a plain send's run-start commit here, on the ORM's thread; None: leave the send to ``execute()``.

        ``session``: the caller's (unsaved for a chat's first send: the commit creates it).
        ``stream_sequence``: the session stream's head read on the loop, if it was; for an
        existing session without it, the head is read here where the manager can
        (the database manager), else None is returned. Raises what ``execute()`` raises
        for the same send (ValidationError, RequestKeyConflictError,
        RequestAlreadyCompletedError, MessageTooLargeError, SessionFullError,
        SessionNotFoundError; ``state_history_incomplete`` for a database failure).
        """
        with typed_errors("execute", logger):
            return self._start_send_in_thread(session, messages, request_key, stream_sequence)

    def _start_send_in_thread(
        self, session: ChatSession, messages: list[dict[str, Any]], request_key: str | None, head: int | None
    ) -> StartedSend | None:
        request = rq.send_start_request(session.id, rq.validate_messages(messages)[-1], request_key=request_key)
        digest, is_new = request.input_hash, session._state.adding
        if not is_new and request_key and rq.lookup_request_key(session.id, request_key, digest) is not None:
            return None  # a repeat attaches to its key's run: execute() answers it
        if not is_new and head is None:
            manager = get_stream_manager()
            if not manager.joins_transactions_of(write_alias()):
                return None
            info = manager.get_info_in_thread(session.stream_id)
            head = info.head_sequence if info else 0
        launch = Launch(request)
        self.prepare_start(session, launch, stream_sequence=head)
        assert not guards.is_redo(request)  # a plain send redoes nothing: no side-effect guard to read
        try:
            result = store.start_run(request)
        except (AlreadyRunningError, RunStartConflictError, StreamFenceError, IntegrityError):
            return None  # nothing was committed: execute() examines the live run (or the key's)
        return StartedSend(session, launch, result)

    async def aopen_send(self, started: StartedSend, *, user: Any = None) -> RunHandle:
        """Open a send started on the ORM's thread where runs live: its claim (unless joined), its task.

        Raises FrameworkInternalError (``cause: after_run_start``) as ``execute()`` does
        once a run-start commit landed.
        """
        opening = self.open_started(started.session, started.launch, started.result, user=user)
        handle = await self.runner.call(opening)
        return await self._launched(handle, started.launch, user)
