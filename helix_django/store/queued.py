"""Queued messages: the writes of a follow-up stored under multitask ``enqueue`` until it starts.

A queued message moves once, by compare-and-set: ``queued`` to ``started`` (with the run it
started), ``removed`` (its owner took it back) or ``refused`` (its start was refused with a
typed error no retry fixes). Rows stay for the admin's history; only ``queued`` ones are
listed in the snapshot and started.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from helix_django.errors import QueuedMessageNotFoundError, QueuedMessageNotQueuedError, RequestKeyConflictError
from helix_django.ids import new_id
from helix_django.models import QueuedMessage, QueuedMessageStatus, Run
from helix_django.models.run import LIVE_STATUSES
from helix_django.orm import sync_to_async
from helix_django.store import reads

QUEUED = QueuedMessageStatus.QUEUED


def minted_request_key(queued_id: str) -> str:
    """Return the request key a queued message without one of its own starts with: ``queued:<id>``."""
    return f"queued:{queued_id}"


def enqueue_message(
    session_id: str, message: dict[str, Any], *, request_key: str | None, input_hash: str
) -> tuple[QueuedMessage, bool]:
    """Store ``message`` as the session's next queued message; return ``(row, is_duplicate)``.

    A send repeated with its request key while its message still waits returns the stored row
    (``is_duplicate``: True). Raises RequestKeyConflictError when the key was used for
    other input (002, "Retried sends and request keys").
    """
    queued_id = new_id("qm")
    row = QueuedMessage(
        id=queued_id,
        session_id=session_id,
        message=message,
        message_id=str(message.get("id") or ""),
        request_key=request_key or minted_request_key(queued_id),
        input_hash=input_hash,
    )
    try:
        with transaction.atomic(using=reads.write_alias()):
            row.save(force_insert=True)
    except IntegrityError:
        existing = QueuedMessage.objects.filter(session_id=session_id, request_key=row.request_key).first()
        if existing is None:
            raise
        if existing.input_hash != input_hash:
            raise RequestKeyConflictError() from None
        return existing, True
    return row, False


def queued_messages(session_id: str) -> list[QueuedMessage]:
    """Return the session's waiting messages, oldest first."""
    return list(QueuedMessage.objects.filter(session_id=session_id, status=QUEUED).order_by("created_at", "id"))


def queue_position(row: QueuedMessage) -> int:
    """Return ``row``'s place among its session's waiting messages (1: next to start)."""
    waiting = QueuedMessage.objects.filter(session_id=row.session_id, status=QUEUED)
    return waiting.filter(created_at__lt=row.created_at).count() + 1


def mark_started(queued_id: str, run_id: str | None) -> bool:
    """Record that the queued message started run ``run_id`` (None: unknown) (compare-and-set on ``queued``)."""
    rows = QueuedMessage.objects.filter(pk=queued_id, status=QUEUED)
    return bool(rows.update(status=QueuedMessageStatus.STARTED, run_id=run_id))


def mark_refused(queued_id: str, error_code: str) -> bool:
    """Record that the queued message's start was refused with ``error_code`` (compare-and-set on ``queued``)."""
    rows = QueuedMessage.objects.filter(pk=queued_id, status=QUEUED)
    return bool(rows.update(status=QueuedMessageStatus.REFUSED, error_code=error_code[:64]))


def remove_queued(session_id: str, queued_id: str) -> QueuedMessage:
    """Take a waiting message back before it starts; return it as removed.

    Raises QueuedMessageNotFoundError (404) for a message not in the session,
    QueuedMessageNotQueuedError (409, ``runId`` when it started) for one that no longer waits.
    """
    rows = QueuedMessage.objects.filter(pk=queued_id, session_id=session_id)
    if rows.filter(status=QUEUED).update(status=QueuedMessageStatus.REMOVED):
        return rows.get()
    row = rows.first()
    if row is None:
        raise QueuedMessageNotFoundError()
    raise QueuedMessageNotQueuedError(cause=row.status, **({"runId": row.run_id} if row.run_id else {}))


def sessions_waiting_to_start() -> list[str]:
    """Return the ids of sessions holding a queued message while none of their runs is live.

    What the relaunch scan starts: a run that ended in a process that stopped before its
    session's next message started.
    """
    waiting = QueuedMessage.objects.filter(status=QUEUED).values_list("session_id", flat=True).distinct()
    live = Run.objects.filter(session_id__in=list(waiting), status__in=LIVE_STATUSES).values_list("session_id")
    return sorted(set(waiting) - {session_id for (session_id,) in live})


aenqueue_message = sync_to_async(enqueue_message)
aqueued_messages = sync_to_async(queued_messages)
aqueue_position = sync_to_async(queue_position)
amark_started = sync_to_async(mark_started)
amark_refused = sync_to_async(mark_refused)
aremove_queued = sync_to_async(remove_queued)
asessions_waiting_to_start = sync_to_async(sessions_waiting_to_start)
