"""The three ways recovery ends a run: interrupted, completed from the provider, cancelled.

Each writes the terminal commit through the store (partial output kept as a partial
message), then closes the run's stream as the run itself (fenced on its run id, so a
later turn's stream is never touched), then logs sanitized telemetry.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from helix_django import store, telemetry
from helix_django.errors import RunCancelledError, RunInterruptedError, StreamConnectionError, StreamFenceError
from helix_django.models import CancelledBy, Checkpoint, CheckpointKind, Run, RunStatus, ToolExecution
from helix_django.orm import sync_to_async
from helix_django.protocol import RUN_KEY
from helix_django.recovery.partial import (
    PartialOutput,
    apply_chunks,
    aread_run_chunks,
    arebuild_partial,
    current_row,
    drop_uncommitted_step,
    last_step_sequence,
)
from helix_django.recovery.provider import aended_operation_usage, provider_for
from helix_django.signals import run_finished
from helix_django.store.run_ends import helix_metadata
from helix_django.streams import get_stream_manager
from helix_django.usage import chars_of, finish_stored

logger = logging.getLogger(__name__)


def _fresh(run_id: str) -> Run:
    return Run.objects.get(pk=run_id)


def _told_partial(
    run: Run, message: dict[str, Any] | None, status: str, cancelled_by: str = ""
) -> list[dict[str, Any]]:
    """The ``message-metadata`` chunk a run's own partial ending sends (runtime/endings.py), for a kept partial.

    Readers then hold the metadata the snapshot has: ``helix = {runId, status, partial, cancelledBy?}``.
    """
    if not message or not message.get("parts"):
        return []
    helix = helix_metadata(run.id, status, cancelled_by=cancelled_by)
    return [{"type": "message-metadata", "messageMetadata": {"helix": helix}}]


async def aclose_stream(run: Run, chunks: list[dict[str, Any]], *, end_status: str | None, error: dict | None) -> None:
    """Append ``chunks`` as ``run`` and end (or fail) its stream; a later run's claim is left alone.

    A run whose own claim has not landed (the stream is missing, or held by an earlier run
    at a lower epoch: its process is still claiming, or died before it could) is closed at
    its epoch all the same: readers waiting for the run get its end, and the claim its
    process may still make is then refused (``run_ended``, ``BaseStreamManager.claim_stream``),
    so a run ended elsewhere never starts streaming after its end.
    """
    manager = get_stream_manager()
    marked = [{**chunk, RUN_KEY: run.id} for chunk in chunks]
    try:
        info = await manager.get_info(run.session_id)
        if info is None or info.run_id != run.id or info.status != "active":
            epoch = await sync_to_async(_run_start_epoch)(run.id)
            if epoch is None or (info is not None and info.run_id != run.id and info.epoch >= epoch):
                return  # a later run holds the stream
            await manager.claim_stream(run.session_id, run.id, epoch=epoch)
        if marked:
            await manager.append(run.session_id, run.id, marked)
        if error is not None:
            await manager.fail_stream(run.session_id, run.id, error)
        else:
            await manager.end_stream(run.session_id, run.id, end_status=end_status or "completed")
    except StreamFenceError:
        logger.info("helix recovery: stream of run %s is held by a later run; left alone", run.id)
    except StreamConnectionError:
        logger.warning("helix recovery: stream of run %s could not be closed (backend unavailable)", run.id)


def _run_start_epoch(run_id: str) -> int | None:
    """The epoch of ``run_id``'s stream claim: the id of its ``run_start`` checkpoint (None: none)."""
    return Checkpoint.objects.filter(run_id=run_id, kind=CheckpointKind.RUN_START).values_list("id", flat=True).first()


async def _head(run: Run, partial: PartialOutput | None) -> int:
    try:
        info = await get_stream_manager().get_info(run.session_id)
    except StreamConnectionError:
        info = None
    heads = [run.start_sequence, partial.last_sequence if partial else 0, info.head_sequence if info else 0]
    return max(heads)


async def ainterrupt(run: Run, partial: PartialOutput, *, stage: str, cause: str, invalidate: bool = False) -> Run:
    """End ``run`` as ``interrupted``: partial output kept, unknown tool outcomes marked, stream failed.

    The stream gets one ``helix-run-end`` and a typed, retryable ``run_interrupted`` error
    body. Raises RunSupersededError when the run changed meanwhile (e.g. it was cancelled).
    """
    tools_unknown = await store.amark_started_tool_executions_unknown(run.id)
    await store.acommit_terminal(
        run.id,
        RunStatus.INTERRUPTED,
        response_message=partial.message if partial.message["parts"] else None,
        stream_sequence=await _head(run, partial),
        error=RunInterruptedError(cause=cause),
        stage=stage[:32],
    )
    if invalidate:
        await store.arecord_recovery(run.id, is_continuation_valid=False)
    body = RunInterruptedError(cause=cause, runId=run.id).to_body()
    told = _told_partial(run, partial.message, RunStatus.INTERRUPTED)
    await aclose_stream(run, [*told, {"type": "helix-run-end", "status": "interrupted"}], end_status=None, error=body)
    ended = await sync_to_async(_fresh)(run.id)
    await run_finished.asend(sender=Run, run=ended, status=RunStatus.INTERRUPTED, usage=dict(ended.usage or {}))
    telemetry.emit(
        "run.interrupted",
        **telemetry.run_fields(ended),
        previous_status=run.status,
        stage=stage,
        reason=cause,
        partial_chars=partial.text_chars,
        chunk_count=partial.chunk_count,
        tools_unknown=tools_unknown,
        tools_completed=await ToolExecution.objects.filter(run_id=run.id, status="succeeded").acount(),
        elapsed_ms=int((timezone.now() - run.started_at).total_seconds() * 1000) if run.started_at else None,
    )
    return ended


async def acomplete_from_provider(run: Run, result: Any) -> Run:
    """End ``run`` as ``completed`` with the provider operation's final output (000, "Reconcile").

    The response is the run's last committed step plus the operation's reasoning and
    text. Readers get a ``data-stream-resync`` (reason ``crash_recovery``) so they reload
    the snapshot. Raises RunSupersededError when the run changed meanwhile.
    """
    if run.is_live:
        current: dict[str, Any] | None = (await arebuild_partial(run)).message
    else:
        current = await sync_to_async(current_row)(run)
    chunks = await aread_run_chunks(run)
    committed = await sync_to_async(last_step_sequence)(run)
    base = drop_uncommitted_step(current, chunks, committed) if current else None
    synthetic: list[dict[str, Any]] = [{"type": "start-step"}]
    for kind, text in (("reasoning", result.reasoning), ("text", result.text)):
        if text:
            synthetic += [
                {"type": f"{kind}-start", "id": f"{kind}-recovered"},
                {"type": f"{kind}-delta", "id": f"{kind}-recovered", "delta": text},
                {"type": f"{kind}-end", "id": f"{kind}-recovered"},
            ]
    synthetic += [{"type": "finish-step"}, {"type": "finish", "finishReason": result.finish_reason or "stop"}]
    acc = apply_chunks(base, run.response_message_id, [(0, c) for c in synthetic])
    message = acc.snapshot(close=True)
    head = await _head(run, None)
    cp = await store.acommit_terminal(
        run.id,
        RunStatus.COMPLETED,
        response_message=message,
        stream_sequence=head,
        stage="",
        usage=finish_stored(run.usage, chars_of(message["parts"]), result.usage),
    )
    resync = {
        "type": "data-stream-resync",
        "data": {
            "reason": "crash_recovery",
            "runId": run.id,
            "checkpointId": cp.id,
            "messageCount": cp.message_count,
            "stepCount": cp.step_count,
            "fromSequence": head,
        },
    }
    await aclose_stream(
        run, [resync, {"type": "helix-run-end", "status": "completed"}], end_status="completed", error=None
    )
    ended = await sync_to_async(_fresh)(run.id)
    await run_finished.asend(sender=Run, run=ended, status=RunStatus.COMPLETED, usage=dict(ended.usage or {}))
    return ended


async def _usage_with_operation(run: Run, partial: PartialOutput | None) -> dict[str, Any] | None:
    """Return ``run``'s usage completed with what the provider reports of its ended operation, or None.

    The operation's call is the one past the stored record (the text past its ``countedChars``:
    the record, written with each step commit, does not cover it). None when there is no such
    text or operation, or the provider tells nothing: the estimate of :func:`~helix_django.usage.finish_stored` stands.
    """
    if partial is None or not run.provider_operation_id:
        return None
    chars = chars_of(partial.message.get("parts") or [])
    if chars <= int((run.usage or {}).get("countedChars", 0)):
        return None
    call = await aended_operation_usage(provider_for(run), run.provider_operation_id)
    return finish_stored(run.usage, chars, call) if call else None


async def acancel_ended(run: Run, partial: PartialOutput | None, *, provider_cancel_result: str) -> Run:
    """End the live ``run`` as ``cancelled`` (its partial output kept); a cancelled run is never resumed on its own.

    Who asked stays as recorded with the request (``cancelled_by``), else ``system``. Its
    usage counts what the provider reports of its ended operation where it can tell.
    Raises RunSupersededError when the run ended or changed meanwhile (an ended run is
    never cancelled).
    """
    cancelled_by = run.cancelled_by or CancelledBy.SYSTEM
    await store.arecord_recovery(
        run.id,
        cancel_requested_at=run.cancel_requested_at or timezone.now(),
        provider_cancel_result=provider_cancel_result,
        cancelled_by=cancelled_by,
    )
    message = partial.message if partial is not None else await sync_to_async(current_row)(run)
    await store.acommit_terminal(
        run.id,
        RunStatus.CANCELLED,
        response_message=message if message and message.get("parts") else None,
        stream_sequence=await _head(run, partial),
        error=RunCancelledError(),
        stage=run.interrupted_stage or run.status,
        usage=await _usage_with_operation(run, partial),
    )
    told = _told_partial(run, message, RunStatus.CANCELLED, cancelled_by=cancelled_by)
    await aclose_stream(
        run, [*told, {"type": "helix-run-end", "status": "cancelled"}], end_status="cancelled", error=None
    )
    ended = await sync_to_async(_fresh)(run.id)
    await run_finished.asend(sender=Run, run=ended, status=RunStatus.CANCELLED, usage=dict(ended.usage or {}))
    return ended
