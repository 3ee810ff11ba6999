"""Queue starts: a session's waiting message starts when its live run ends (multitask ``enqueue``).

Every ending of a run (``run_finished``: the run loop's endings and the relaunch scan's)
starts the session's oldest waiting message as a send of its own, in a task of its own so
the ending is not delayed; a run stopped for an interrupting send (``cancelled_by:
follow_up``) leaves the queue to that send's run, whose ending starts it. The relaunch
scan also starts the messages of sessions whose last run ended in a process that stopped
before it started them (:func:`astart_waiting`).

A start is idempotent: it sends with the message's request key (its own, or one minted
from its id), so two processes starting it at once attach to one run (002, "Retried
sends and request keys"); the row moves to ``started`` by compare-and-set. A start that
meets a live run (another send got in first) leaves the message waiting: it starts at
that run's end. A start refused with a typed error no retry fixes (a full session, a
removed agent) marks the message ``refused`` with the error's code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from helix_django.errors import (
    AlreadyRunningError,
    HelixError,
    RequestAlreadyCompletedError,
    RunStartConflictError,
    SessionNotFoundError,
)
from helix_django.models import CancelledBy, ChatSession, QueuedMessage
from helix_django.runtime import multitask
from helix_django.runtime.enqueue import QueuedSend
from helix_django.runtime.handles import RunHandle
from helix_django.runtime.runner import start_task
from helix_django.signals import run_finished
from helix_django.store import queued

logger = logging.getLogger(__name__)

_starts: set[asyncio.Task[Any]] = set()
_executor: Callable[[], Any] | None = None


async def astart_next(executor: Any, session_id: str) -> RunHandle | None:
    """Start the session's oldest waiting message through ``executor``; return its run's handle.

    None when nothing waits, when a run is live (the message waits for its end), or when the
    start was refused (the message is marked ``refused``). ``executor``: the runtime's
    :class:`~helix_django.runtime.executor.Executor`.
    """
    waiting = await queued.aqueued_messages(session_id)
    if not waiting:
        return None
    row = waiting[0]
    session = await ChatSession.objects.select_related("owner").filter(pk=session_id).afirst()
    if session is None:
        return None
    try:
        handle = await executor.execute(
            session=session,
            messages=[row.message],
            request_key=row.request_key,
            user=session.owner,
            multitask=multitask.REJECT,
        )
    except (AlreadyRunningError, RunStartConflictError):
        return None  # another run got in first: this one starts at its end
    except RequestAlreadyCompletedError as exc:  # started before, and a later run exists already
        await queued.amark_started(row.id, exc.extra.get("runId") or None)
        return None
    except SessionNotFoundError:
        return None
    except HelixError as exc:
        if exc.is_retryable:
            logger.warning("queued message %s: its start failed (%s); it stays queued", row.id, exc.code)
        else:
            await queued.amark_refused(row.id, exc.code)
            logger.warning("queued message %s: its start was refused (%s)", row.id, exc.code)
        return None
    assert not isinstance(handle, QueuedSend)  # sent with reject: never queued again
    await queued.amark_started(row.id, handle.run_id)
    return handle


async def astart_waiting(executor: Any) -> int:
    """Start the oldest waiting message of every session that has one and no live run; return how many started."""
    started = 0
    for session_id in await queued.asessions_waiting_to_start():
        try:
            started += await astart_next(executor, session_id) is not None
        except Exception as exc:  # noqa: BLE001 - one session must not stop the others
            logger.warning("session %s: its queued message did not start: %s", session_id, type(exc).__name__)
    return started


def _start_soon(executor: Any, session_id: str) -> None:
    """Start the session's next waiting message in a task of its own (the ending is not delayed)."""

    async def start() -> None:
        try:
            await astart_next(executor, session_id)
        except Exception as exc:  # noqa: BLE001 - a failed start leaves the message queued for the scan
            logger.warning("session %s: its queued message did not start: %s", session_id, type(exc).__name__)

    task = start_task(start(), name=f"helix-queue-{session_id}")
    _starts.add(task)
    task.add_done_callback(_starts.discard)


async def _on_run_finished(sender: Any, run: Any, status: str = "", **kwargs: Any) -> None:
    if run.cancelled_by == CancelledBy.FOLLOW_UP:
        return  # an interrupting send starts now: the queue goes on at that run's end
    waiting = QueuedMessage.objects.filter(session_id=run.session_id, status=queued.QUEUED)
    if _executor is not None and await waiting.aexists():
        _start_soon(_executor(), run.session_id)


def connect(executor: Callable[[], Any]) -> None:
    """Connect the ``run_finished`` receiver that starts waiting messages through ``executor()`` (idempotent).

    ``executor``: returns the runtime's executor (``AppConfig.run_executor``), called at each start.
    """
    global _executor
    _executor = executor
    run_finished.connect(_on_run_finished, dispatch_uid="helix_queue_starts")
