"""Fencing a run's writer while recovery decides, and lifting the fence once the run ended meanwhile.

Recovery (the relaunch scan, a Stop served by another process, Mark interrupted) decides
a run's ending from what the run wrote, so it first pauses the run's stream as the run:
every later append of that run raises StreamFenceError in its writer (DESIGN, "Stream
manager contract": writes are fenced on the run that holds the claim).
"""

from __future__ import annotations

from helix_django.errors import StreamFenceError
from helix_django.models import Run, RunStatus
from helix_django.recovery.outcomes import aclose_stream
from helix_django.streams import get_stream_manager


async def fence_writer(run: Run) -> bool:
    """Stop the process executing ``run`` from writing more chunks: pause its stream as the run.

    Recovery decides from what the run wrote, so the writer is fenced first (a forced
    *Mark interrupted* may race the run's finish). After the pause every append of the
    run raises StreamFenceError in its writer, which stops there; a ``finish`` it wrote
    before is read by the caller and the run ends ``completed``. Returns True when this
    call paused the stream, False when it was no longer active or is held by a later run
    (nothing more can be written as this run). Raises StreamConnectionError.
    """
    try:
        await get_stream_manager().pause_stream(run.session_id, run.id)
    except StreamFenceError:
        return False
    return True


async def release_fence(run_id: str) -> None:
    """Close the stream :func:`fence_writer` paused, as the run ended meanwhile (its own ending was fenced).

    A run that ended ``completed`` or ``cancelled`` ends the stream with that status; one
    that ended ``failed`` or ``interrupted`` fails it with the run's typed error.
    """
    run = await Run.objects.filter(pk=run_id).afirst()
    if run is None or run.is_live:
        return
    end = [{"type": "helix-run-end", "status": run.status}]
    if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        await aclose_stream(run, end, end_status=run.status, error=None)
    elif run.status in (RunStatus.FAILED, RunStatus.INTERRUPTED):
        detail = run.error_detail() or {}
        body = {"error": detail.get("message") or "The generation did not finish", "runId": run.id}
        body.update(code=detail.get("code") or f"run_{run.status}", retryable=bool(detail.get("retryable")))
        await aclose_stream(run, end, end_status=None, error=body)
