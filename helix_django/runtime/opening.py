"""A run's opening: its first chunks, the stream claim made inside the run-start commit, its abort.

With the database stream manager on the store's database, the executor claims the
session stream and stores the opening chunks inside the run-start transaction
(``RunStartRequest.in_transaction``): the send's first byte waits for one transaction
and one thread hop instead of two of each. Elsewhere the claim follows the commit
(``BaseStreamManager.claim_and_append``); the joined claim goes through
``manager.transactions`` (:mod:`helix_django.streams.transactions`). A run that fails before its task starts is ended
``failed`` by :func:`abort_start`, its stream too once it was claimed.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from helix_django import store
from helix_django.errors import FrameworkInternalError, HelixError, RunSupersededError
from helix_django.models import Run, RunStatus
from helix_django.runtime.handles import Launch
from helix_django.streams import get_stream_manager
from helix_django.streams.transactions import TransactionalWrites

logger = logging.getLogger("helix_django.runtime.executor")


def opening_chunks(result: store.RunStartResult, launch: Launch) -> list[dict[str, Any]]:
    """Return a run's opening chunks: ``helix-run-start``, ``start``, then the launch's prelude (e.g. settled calls)."""
    run = result.run
    opening = {"type": "helix-run-start", "runId": run.id, "kind": launch.request.kind, "attempt": run.attempt}
    return [
        {**opening, "messageId": run.response_message_id},
        {"type": "start", "messageId": run.response_message_id},
        *(launch.prelude(result) if launch.prelude else []),
    ]


def claim_in_start(
    transactions: TransactionalWrites, stream_id: str, launch: Launch, result: store.RunStartResult
) -> tuple[Any, list]:
    """Inside the run-start transaction: claim the stream with the opening chunks; return (token, chunks)."""
    chunks = [{**chunk, "_run": result.run.id} for chunk in opening_chunks(result, launch)]
    return transactions.claim(stream_id, result.run.id, result.checkpoint.id, chunks), chunks


async def abort_start(run: Run, exc: BaseException, *, stream_id: str | None = None) -> None:
    """End a run that failed before its task started (it never started inference).

    ``stream_id``: the run had claimed that stream (its opening chunks are stored), so
    the stream is failed too, with the typed error: readers end, none waits for a run
    that will never write.
    """
    if isinstance(exc, RunSupersededError):
        return
    error = exc if isinstance(exc, HelixError) else None
    logger.warning("run %s could not open its stream: %s", run.id, type(exc).__name__)
    try:
        await store.acommit_terminal(
            run.id, RunStatus.FAILED, response_message=None, stream_sequence=run.start_sequence, error=error
        )
    except HelixError:
        logger.info("run %s was superseded before it started", run.id)
        return
    if stream_id is not None:
        body = (error or FrameworkInternalError(cause="after_run_start")).to_body()
        with contextlib.suppress(HelixError):  # a newer run holds the stream, or the backend is down
            await get_stream_manager().fail_stream(stream_id, run.id, body)
