"""The WebSocket's frames: JSON text messages, one frame each (docs/transport.md, "Routes").

The stream's own frames are the raw stream route's (:mod:`.wire_raw`: ``chunk``, then one
``end`` / ``fail``), sent as JSON text; this module builds the frames only the WebSocket
sends: the answer to a ``send`` (``run``), to a ``cancel`` (``cancelled``) and a typed
refusal (``error``, the flat wire body of 002, "Wire errors").
"""

from __future__ import annotations

from typing import Any

from helix_django.errors import as_helix_error
from helix_django.transport.responses import rendering_language


def error_frame(error: BaseException, language: str | None = None) -> dict[str, Any]:
    """Return the typed ``error`` frame of ``error``, its message rendered in ``language`` (None: the active one).

    An untyped error becomes ``framework_internal_error`` (:func:`helix_django.errors.as_helix_error`).
    """
    with rendering_language(language):
        return {"type": "error", **as_helix_error(error).to_body()}


def run_frame(handle: Any) -> dict[str, Any]:
    """Return the ``run`` frame answering a ``send``: the run's ids and where its frames start."""
    return {
        "type": "run",
        "runId": handle.run_id,
        "responseMessageId": handle.response_message_id,
        "fromSequence": handle.from_sequence,
        "isDuplicate": handle.is_duplicate,
    }


def queued_frame(queued: Any) -> dict[str, Any]:
    """Return the ``queued`` frame answering a ``send`` stored behind the live run (multitask ``enqueue``)."""
    return {"type": "queued", "queued": queued.to_body()}


def cancelled_frame(run: Any) -> dict[str, Any]:
    """Return the ``cancelled`` frame answering a ``cancel``: the run's id and the status it was left in."""
    return {"type": "cancelled", "runId": run.id, "status": run.status}
