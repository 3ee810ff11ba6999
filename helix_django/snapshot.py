"""Consistent, checkpoint-anchored snapshots (002, "Snapshots", "Snapshot status", "Consistent reads").

``abuild_snapshot(session_id)`` returns the FrontendSnapshot dict::

    {"sessionId", "messages": [UIMessage], "streamSequence": int, "state": {...},
     "status": "active"|"paused"|"ended"|"failed", "resumeMessageId"?: str,
     "latestTruncateCheckpointId": int|None, "errorDetail"?: {...},
     "checkpointId": int|None, "stepCount": int,
     "runId": str|None, "runStatus": str|None,        # helix extras
     "cancelledBy"?: "user"|"staff"|"system"|"follow_up",
     "queuedMessages"?: [{id, role, parts, metadata, queuedMessageId, createdAt}],
     "runUsage"?: {inputTokens, outputTokens, ..., source, "cost"?: {amount, currency}}}

or None when the session does not exist. ``runId``/``runStatus`` are extra fields so a
client can tell a cancelled or interrupted turn from a completed one; ``cancelledBy``
(a cancelled run whose canceller is known) says who stopped it. ``queuedMessages`` lists
the messages waiting to start after the live run (multitask ``enqueue``), oldest first;
absent when none waits. ``runUsage`` is the current run's token usage as committed so far
(:mod:`helix_django.usage`), absent before its first commit; its ``cost`` (a decimal
string and a currency code, :mod:`helix_django.pricing`) is there when the run's model has a
price in ``HELIX["MODEL_PRICES"]``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

from asgiref.sync import async_to_sync
from django.db import DatabaseError, connections, router

from helix_django.conf import helix_settings
from helix_django.errors import HistoryIncompleteError, ValidationError, store_error_for
from helix_django.models import ChatSession, Checkpoint, CheckpointKind, Run, RunStatus
from helix_django.orm import sync_to_async
from helix_django.pricing import run_cost
from helix_django.store.queued import queued_messages
from helix_django.store.reads import Row, read_rows
from helix_django.streams import get_stream_manager
from helix_django.streams.base import FAILED, PAUSED, StreamInfo

PASS_DELAYS_SECONDS = (0.025, 0.05)
MAX_DEADLINE_MS = 2_147_483_647


@dataclasses.dataclass(frozen=True)
class SnapshotOptions:
    """Conversion options; the chat route's replay prefix must use the same ones (002, C-1)."""

    include_reasoning: bool = True
    """Keep ``reasoning`` parts in messages."""


def derive_status(run: Run | None, stream: StreamInfo | None) -> str:
    """Return the snapshot status: the run decides, never the stream alone (002, "Snapshot status").

    A live run is ``paused`` when suspended or its stream is paused, else ``active``;
    otherwise ``failed`` if the run or the stream failed (an interrupted run counts as
    failed); otherwise ``ended`` (completed, cancelled, superseded, or no run).
    """
    if run is not None and run.is_live:
        if run.status == RunStatus.SUSPENDED_CLIENT_TOOL or (stream is not None and stream.status == PAUSED):
            return "paused"
        return "active"
    if run is not None and run.status in (RunStatus.FAILED, RunStatus.INTERRUPTED):
        return "failed"
    if run is None and stream is not None and stream.status == FAILED:
        return "failed"
    return "ended"


ROW_FIELDS = Row._fields


def _convert(message: Row, options: SnapshotOptions) -> dict[str, Any]:
    ui = message.ui_message()
    if not options.include_reasoning:
        ui["parts"] = [p for p in ui["parts"] if p.get("type") != "reasoning"]
    return ui


class _Deadline:
    def __init__(self, deadline_ms: float) -> None:
        loop = asyncio.get_running_loop()
        self.at = math.inf if math.isinf(deadline_ms) else loop.time() + deadline_ms / 1000

    def check(self, stage: str) -> None:
        if asyncio.get_running_loop().time() > self.at:
            raise HistoryIncompleteError(f"Snapshot read timed out (deadline@{stage})", cause="snapshot_unstable")


def _validate_deadline(deadline_ms: float) -> float:
    if math.isinf(deadline_ms) and deadline_ms > 0:
        return deadline_ms
    if not (0 < deadline_ms <= MAX_DEADLINE_MS):
        raise ValidationError("Invalid snapshot read deadline", cause="snapshot_read_deadline")
    return deadline_ms


def _read_head(session_id: str) -> tuple[ChatSession | None, Run | None, int | None]:
    """Read the session with its current run, then the latest truncate checkpoint id."""
    session = ChatSession.objects.select_related("current_run").filter(pk=session_id).first()
    if session is None:
        return None, None, None
    fence = _read_fence(session_id)
    return session, session.current_run, fence[2] if fence else None


def _read_body(session_id: str) -> tuple[Checkpoint | None, list[Row]]:
    """Read the session's latest checkpoint and the committed rows it counts."""
    checkpoint = Checkpoint.objects.filter(session_id=session_id).order_by("-id").first()
    return checkpoint, read_rows(session_id, before=checkpoint.message_count if checkpoint else None)


def _read_fence(session_id: str) -> tuple[str | None, str | None, int | None] | None:
    """Read (current run id, its status, latest truncate checkpoint id) in one query; None if gone.

    The closing fence of a pass (002, "Consistent reads"): a bare row, no model instances.
    """
    tables = {model.__name__: model._meta.db_table for model in (ChatSession, Run, Checkpoint)}
    sql = (
        f"SELECT s.current_run_id, r.status, (SELECT MAX(c.id) FROM {tables['Checkpoint']} c "  # noqa: S608
        "WHERE c.session_id = s.id AND c.kind = %s) "
        f"FROM {tables['ChatSession']} s LEFT JOIN {tables['Run']} r ON r.id = s.current_run_id WHERE s.id = %s"
    )
    with connections[router.db_for_read(ChatSession)].cursor() as cursor:
        cursor.execute(sql, [CheckpointKind.TRUNCATE.value, session_id])
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def _read_pass(session_id: str) -> tuple[tuple, Checkpoint | None, list[Row], list[dict[str, Any]], tuple | None]:
    """One fenced pass in one thread hop: head, latest checkpoint and its rows, waiting messages, fence.

    A waiting message that starts during the pass moves the current run: the fence sees it.
    """
    head = _read_head(session_id)
    if head[0] is None:
        return head, None, [], [], None
    checkpoint, rows = _read_body(session_id)
    waiting = [row.ui_message() for row in queued_messages(session_id)]
    return head, checkpoint, rows, waiting, _read_fence(session_id)


async def abuild_snapshot(
    session_id: str, *, options: SnapshotOptions | None = None, deadline_ms: float | None = None
) -> dict[str, Any] | None:
    """Read the session's snapshot from its latest checkpoint; None if the session does not exist.

    Up to 3 fenced passes (25 and 50 ms apart); a pass counts when (derived status,
    current run id, latest truncate checkpoint id) held across it and no row it read is
    newer than its checkpoint. One deadline bounds the read (``SNAPSHOT_READ_DEADLINE_MS``).
    Raises HistoryIncompleteError: ``snapshot_unstable`` (retryable; also at the
    deadline, naming the read it waited on), ``store_error``, ``short_read`` (retryable)
    or ``corrupt_row`` (409). Raises ValidationError for a deadline outside (0, 2**31-1] ms.
    """
    options = options or SnapshotOptions()
    deadline = _Deadline(_validate_deadline(deadline_ms or helix_settings.SNAPSHOT_READ_DEADLINE_MS))
    manager = get_stream_manager()
    read_pass = sync_to_async(_read_pass)
    for attempt in range(3):
        if attempt:
            await asyncio.sleep(PASS_DELAYS_SECONDS[attempt - 1])
        try:
            deadline.check("getStreamInfo")
            # The stream is read before and after the database pass, so both fences
            # bracket the rows (the stream may live in another store, e.g. Redis).
            stream = await manager.get_info(session_id)
            deadline.check("getCheckpoint")
            (session, run, truncate_id), checkpoint, rows, waiting, fence = await read_pass(session_id)
            if session is None:
                return None
            deadline.check("getCurrentRun")
            stream2 = await manager.get_info(session.stream_id)
        except HistoryIncompleteError:
            raise
        except DatabaseError as exc:
            raise store_error_for(exc) from exc
        if fence is None:
            return None
        status = derive_status(run, stream)
        # The run's status is in the fence, so the run read first stands for the run after it.
        before = (session.current_run_id, run.status if run else None, truncate_id, status)
        if before != (*fence, derive_status(run, stream2)):
            continue
        if checkpoint is not None and any(row.checkpoint_id > checkpoint.id for row in rows):
            continue
        expected = checkpoint.message_count if checkpoint else len(rows)
        if len(rows) != expected:
            raise HistoryIncompleteError(cause="short_read")
        if any(row.position != index for index, row in enumerate(rows)):
            raise HistoryIncompleteError(cause="corrupt_row")
        snapshot = _assemble(session, run, stream, checkpoint, rows, status, truncate_id, options)
        if waiting:
            snapshot["queuedMessages"] = waiting
        return snapshot
    raise HistoryIncompleteError(cause="snapshot_unstable")


def _assemble(
    session: ChatSession,
    run: Run | None,
    stream: StreamInfo | None,
    checkpoint: Checkpoint | None,
    rows: list[Row],
    status: str,
    truncate_id: int | None,
    options: SnapshotOptions,
) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "sessionId": session.id,
        "messages": [_convert(row, options) for row in rows],
        "streamSequence": (stream.head_sequence if stream else 0) if checkpoint is None else checkpoint.stream_sequence,
        "state": session.state if checkpoint is None else checkpoint.state,
        "status": status,
        "latestTruncateCheckpointId": truncate_id,
        "checkpointId": None if checkpoint is None else checkpoint.id,
        "stepCount": 0 if checkpoint is None else checkpoint.step_count,
        "runId": run.id if run else None,
        "runStatus": run.status if run else None,
    }
    if run is not None and run.usage:
        cost = run_cost(run.model, run.usage)
        snapshot["runUsage"] = run.usage if cost is None else {**run.usage, "cost": cost.as_json()}
    if run is not None and run.status == RunStatus.CANCELLED and run.cancelled_by:
        snapshot["cancelledBy"] = run.cancelled_by
    if status in ("active", "paused") and run is not None:
        snapshot["resumeMessageId"] = run.response_message_id
    if status == "failed":
        detail = run.error_detail() if run else None
        if detail is None and stream is not None and stream.error:
            detail = {k: stream.error.get(k) for k in ("code", "retryable") if k in stream.error}
        if detail is not None:
            snapshot["errorDetail"] = detail
    return snapshot


build_snapshot = async_to_sync(abuild_snapshot)
