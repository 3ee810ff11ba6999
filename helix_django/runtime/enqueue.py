"""Enqueue: a send that meets a live run under multitask ``enqueue`` is stored to start after it.

The message is stored durably (:mod:`helix_django.store.queued`) and the send is answered
at once with a :class:`QueuedSend`; nothing of the conversation changes until it starts
(:mod:`.queue_starts`: when the live run ends, whatever its ending, or at the relaunch
scan). A repeat of the send with its request key returns the same queued message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from helix_django import store
from helix_django.errors import AlreadyRunningError
from helix_django.models import Run
from helix_django.runtime.requests import clean_user_message
from helix_django.store import queued


@dataclasses.dataclass(frozen=True)
class QueuedSend:
    """A send stored to start once the session's live run ends (multitask ``enqueue``).

    ``position``: 1 for the next message to start. ``live_run_id``: the run it waits for.
    ``is_duplicate``: a keyed repeat of a send already queued.
    """

    queued_message_id: str
    message_id: str
    position: int
    live_run_id: str
    is_duplicate: bool = False

    def to_body(self) -> dict[str, Any]:
        """Return the wire body: ``{queuedMessageId, messageId, position, runId, duplicate}``."""
        return {
            "queuedMessageId": self.queued_message_id,
            "messageId": self.message_id,
            "position": self.position,
            "runId": self.live_run_id,
            "duplicate": self.is_duplicate,
        }


async def aenqueue(request: store.RunStartRequest, message: dict[str, Any], live: Run) -> QueuedSend:
    """Store ``message`` to start after ``live``; return the queued send.

    ``request``: the send's run-start request (its session, request key and input hash). An
    edit (a send that rewinds the conversation) is never queued: it raises
    AlreadyRunningError as under ``reject``. Raises RequestKeyConflictError for a key used
    for other input.
    """
    if request.truncate_to is not None:
        raise AlreadyRunningError()
    row, is_duplicate = await queued.aenqueue_message(
        request.session_id, clean_user_message(message), request_key=request.request_key, input_hash=request.input_hash
    )
    position = await queued.aqueue_position(row)
    return QueuedSend(row.id, row.message_id, position, live.id, is_duplicate=is_duplicate)
