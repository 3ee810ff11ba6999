"""Partial output of a run, rebuilt from its last checkpoint and its stored chunks.

000, "Store partial output explicitly": the text a run streamed before it stopped is
kept and shown as partial. The rebuild starts from the run's response message as of its
last committed step (or as it was at run start, for a run that continues a message) and
applies the run's chunks written after that checkpoint, with the same
:class:`~helix_django.protocol.MessageAccumulator` the runtime and the AI SDK client use.
Chunks of an LLM attempt that a ``data-attempt-superseded`` chunk retired are skipped.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import Subquery

from helix_django.models import Checkpoint, CheckpointKind, Message, Run
from helix_django.orm import sync_to_async
from helix_django.protocol import ATTEMPT_KEY, RUN_KEY, MessageAccumulator
from helix_django.streams import get_stream_manager

StoredChunk = tuple[int, dict[str, Any]]
#: Chunks read per stream-manager call while collecting a run's chunks (one read covers most runs).
READ_BATCH = 5000


@dataclasses.dataclass(frozen=True)
class PartialOutput:
    """The rebuilt response of a run: a UIMessage plus what the rebuild saw."""

    message: dict[str, Any]
    """UIMessage ``{id, role: "assistant", parts, metadata}``; open parts are closed."""
    text_chars: int
    """Characters of text and reasoning parts (the run's ``partial_chars``)."""
    chunk_count: int
    """The run's chunks read from the stream manager."""
    last_sequence: int
    """Highest sequence of the run's chunks (the run's start sequence when it wrote none)."""
    end_status: str
    """``status`` of the run's ``helix-run-end`` chunk ('' when it never wrote one)."""
    has_finish: bool
    """Whether the run wrote a ``finish`` chunk (its output is complete)."""


async def aread_run_chunks(run: Run, *, after: int | None = None) -> list[StoredChunk]:
    """Return ``(sequence, chunk)`` of ``run``'s chunks with sequence > ``after`` (default: its start).

    Reads no further than the start sequence of the session's next run (the one whose
    run-start checkpoint follows ``run``'s): a run's chunks come before it, so the read costs
    what the run wrote, never the rest of the session's stream (a run that wrote nothing
    reads nothing), and for the session's last run no further than the head its first read
    saw. Also stops at the first chunk of a later run once the run's own chunks were seen.
    Raises StreamConnectionError when the stream manager cannot be read.
    """
    manager = get_stream_manager()
    cursor = run.start_sequence if after is None else after
    upper = await sync_to_async(next_run_start)(run)
    out: list[StoredChunk] = []
    while upper is None or cursor < upper:
        # Sequences strictly increase, so (cursor, upper] holds at most upper - cursor chunks.
        limit = READ_BATCH if upper is None else min(READ_BATCH, upper - cursor)
        batch, info = await manager.read_after(run.session_id, cursor, limit=limit)
        if not batch:
            return out
        if info is not None and upper is None:
            upper = info.head_sequence  # the head the read saw: its batch covers it, no read after it
        for sequence, chunk in batch:
            owner = chunk.get(RUN_KEY)
            if upper is not None and sequence > upper:
                return out
            if owner == run.id or (out and owner is None and chunk.get("type") == "error"):
                out.append((sequence, chunk))  # a failed stream's error chunk follows the run's last chunk
            elif out and owner:
                return out
        cursor = batch[-1][0]
    return out


def next_run_start(run: Run) -> int | None:
    """Return the start sequence of the run that followed ``run`` in its session (None: none did).

    "Followed" is by run-start checkpoint (ids increase with commits, under the session's
    lock), so runs that started at the same head are ordered too. One indexed query.
    """
    own_start = Checkpoint.objects.filter(run_id=run.id, kind=CheckpointKind.RUN_START).values("id")[:1]
    return (
        Checkpoint.objects.filter(
            session_id=run.session_id, kind=CheckpointKind.RUN_START, id__gt=Subquery(own_start), run__isnull=False
        )
        .order_by("id")
        .values_list("run__start_sequence", flat=True)
        .first()
    )


def base_message(run: Run) -> tuple[dict[str, Any] | None, int]:
    """Return (response row as a UIMessage or None, sequence after which to apply chunks)."""
    row = (
        Message.objects.filter(
            session_id=run.session_id, position=run.start_message_count, ui_id=run.response_message_id
        )
        .only("ui_id", "role", "parts", "metadata", "checkpoint_id")
        .first()
    )
    step = (
        Checkpoint.objects.filter(run=run, kind=CheckpointKind.STEP)
        .order_by("-id")
        .only("id", "stream_sequence")
        .first()
    )
    if step is not None and row is not None and row.checkpoint_id == step.id:
        return row.to_ui_message(), step.stream_sequence
    start = Checkpoint.objects.filter(run=run, kind=CheckpointKind.RUN_START).only("id").first()
    if row is not None and start is not None and row.checkpoint_id == start.id:
        # A continuation: the message existed before this run; its chunks extend it.
        return row.to_ui_message(), run.start_sequence
    return None, run.start_sequence


def current_row(run: Run) -> dict[str, Any] | None:
    """Return ``run``'s response row as it is now (a UIMessage), or None when it has none."""
    row = Message.objects.filter(
        session_id=run.session_id, position=run.start_message_count, ui_id=run.response_message_id, run=run
    ).first()
    return row.to_ui_message() if row is not None else None


def last_step_sequence(run: Run) -> int:
    """Return the stream sequence of ``run``'s last step commit (its start sequence when none)."""
    seq = (
        Checkpoint.objects.filter(run=run, kind=CheckpointKind.STEP)
        .order_by("-id")
        .values_list("stream_sequence", flat=True)
        .first()
    )
    return run.start_sequence if seq is None else seq


def drop_uncommitted_step(
    message: dict[str, Any], chunks: list[StoredChunk], committed_sequence: int
) -> dict[str, Any]:
    """Return ``message`` without the parts of a step that started after ``committed_sequence``.

    Used before the final output of a provider operation replaces that step's partial text.
    """
    if not any(seq > committed_sequence and chunk.get("type") == "start-step" for seq, chunk in chunks):
        return message
    parts = list(message.get("parts") or [])
    starts = [i for i, part in enumerate(parts) if part.get("type") == "step-start"]
    if starts:
        parts = parts[: starts[-1]]
    return {**message, "parts": parts}


def apply_chunks(base: dict[str, Any] | None, message_id: str, chunks: list[StoredChunk]) -> MessageAccumulator:
    """Apply ``chunks`` to ``base`` (or an empty assistant message) and return the accumulator.

    Chunks of attempts retired by ``data-attempt-superseded`` are skipped.
    """
    retired = {
        (chunk.get("data") or {}).get("supersededAttemptId")
        for _seq, chunk in chunks
        if chunk.get("type") == "data-attempt-superseded"
    }
    retired.discard(None)
    acc = MessageAccumulator(
        message_id,
        parts=(base or {}).get("parts"),
        metadata={k: v for k, v in ((base or {}).get("metadata") or {}).items() if k != "helix"},
    )
    for _seq, chunk in chunks:
        if chunk.get(ATTEMPT_KEY) in retired or chunk.get("type") == "data-attempt-superseded":
            continue
        acc.apply(chunk)
    return acc


def text_chars(message: dict[str, Any]) -> int:
    """Return the characters of the text and reasoning parts of a UIMessage."""
    return sum(len(p.get("text", "")) for p in message.get("parts", []) if p.get("type") in ("text", "reasoning"))


async def arebuild_partial(run: Run, chunks: list[StoredChunk] | None = None) -> PartialOutput:
    """Rebuild ``run``'s response from its last checkpoint and later chunks (see module docstring).

    ``chunks`` are the run's chunks when the caller already read them (:func:`aread_run_chunks`).
    Raises StreamConnectionError when the stream manager cannot be read.
    """
    base, after = await sync_to_async(base_message)(run)
    if chunks is None:
        chunks = await aread_run_chunks(run)
    tail = [(seq, chunk) for seq, chunk in chunks if seq > after]
    acc = apply_chunks(base, run.response_message_id, tail)
    end_status = ""
    has_finish = False
    for _seq, chunk in chunks:
        if chunk.get("type") == "helix-run-end":
            end_status = chunk.get("status", "")
        elif chunk.get("type") == "finish":
            has_finish = True
    message = acc.snapshot(close=True)
    if all(p.get("type") == "step-start" for p in message["parts"]):
        message["parts"] = []  # nothing visible was produced: no response row is written
    return PartialOutput(
        message=message,
        text_chars=text_chars(message),
        chunk_count=len(chunks),
        last_sequence=chunks[-1][0] if chunks else run.start_sequence,
        end_status=end_status,
        has_finish=has_finish,
    )
