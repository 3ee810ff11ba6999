"""A run's opening: its first chunks, and the stream claim made inside the run-start commit (issue 23).

With the database stream manager on the store's database, the executor claims the
session stream and stores the opening chunks inside the run-start transaction
(``RunStartRequest.in_transaction``): the send's first byte waits for one transaction
and one thread hop instead of two of each. Elsewhere the claim follows the commit
(``BaseStreamManager.claim_and_append``).
"""

from __future__ import annotations

from typing import Any

from helix_django import store
from helix_django.runtime.handles import Launch


def opening_chunks(result: store.RunStartResult, launch: Launch) -> list[dict[str, Any]]:
    """Return a run's opening chunks: ``helix-run-start``, ``start``, then the launch's prelude (e.g. settled calls)."""
    run = result.run
    opening = {"type": "helix-run-start", "runId": run.id, "kind": launch.request.kind, "attempt": run.attempt}
    return [
        {**opening, "messageId": run.response_message_id},
        {"type": "start", "messageId": run.response_message_id},
        *(launch.prelude(result) if launch.prelude else []),
    ]


def claim_in_start(manager: Any, stream_id: str, launch: Launch, result: store.RunStartResult) -> tuple[Any, list]:
    """Inside the run-start transaction: claim the stream with the opening chunks; return (token, chunks)."""
    chunks = [{**chunk, "_run": result.run.id} for chunk in opening_chunks(result, launch)]
    return manager.claim_in_transaction(stream_id, result.run.id, result.checkpoint.id, chunks), chunks
