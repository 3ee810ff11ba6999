"""What the run change page shows: partial text, a short stream timeline, tool and checkpoint lists.

Everything is read with a constant number of queries, whatever the number of chunks or
tool executions (the stream manager reads chunks in batches of 1 000).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asgiref.sync import async_to_sync

from helix_django.errors import HelixError
from helix_django.models import Run
from helix_django.recovery.partial import apply_chunks, aread_run_chunks, base_message, current_row, text_chars

#: Timeline entries shown at most (runs of the same chunk type are folded into one entry).
MAX_TIMELINE_ENTRIES = 40


@dataclasses.dataclass
class TimelineEntry:
    """One folded run of chunks of the same type: ``first``..``last`` sequence, ``count`` chunks."""

    type: str
    first: int
    last: int
    count: int
    note: str = ""


def build_timeline(chunks: list[tuple[int, dict[str, Any]]]) -> tuple[list[TimelineEntry], int]:
    """Fold consecutive chunks of one type; return (the last ``MAX_TIMELINE_ENTRIES`` entries, entries omitted).

    Notes carry only types, statuses and error codes, never text.
    """
    entries: list[TimelineEntry] = []
    for sequence, chunk in chunks:
        kind = chunk.get("type", "?")
        note = ""
        if kind == "error":
            note = str((chunk.get("helixError") or {}).get("code", ""))
        elif kind == "helix-run-end":
            note = str(chunk.get("status", ""))
        elif kind in ("tool-input-available", "tool-output-available", "tool-output-error"):
            note = str(chunk.get("toolName") or chunk.get("toolCallId", ""))
        if entries and entries[-1].type == kind and not note and not entries[-1].note:
            entries[-1].last, entries[-1].count = sequence, entries[-1].count + 1
        else:
            entries.append(TimelineEntry(kind, sequence, sequence, 1, note))
    omitted = max(0, len(entries) - MAX_TIMELINE_ENTRIES)
    return entries[omitted:], omitted


def change_page_context(run: Run) -> dict[str, Any]:
    """Return the extra context of the run change page: partial text, timeline, tools, checkpoints."""
    context: dict[str, Any] = {"stream_error": ""}
    try:
        chunks = async_to_sync(aread_run_chunks)(run)
        if run.is_live:
            # The same rebuild as the relaunch scan, with the ORM reads done here (sync).
            base, after = base_message(run)
            message: dict[str, Any] | None = apply_chunks(
                base, run.response_message_id, [(seq, c) for seq, c in chunks if seq > after]
            ).snapshot(close=True)
        else:
            message = current_row(run)
    except HelixError as exc:
        chunks, message = [], current_row(run)
        context["stream_error"] = exc.code
    parts = (message or {}).get("parts") or []
    context["response_text"] = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    context["response_chars"] = text_chars(message) if message else 0
    context["response_is_partial"] = run.status != "completed"
    context["timeline"], context["timeline_omitted"] = build_timeline(chunks)
    context["chunk_count"] = len(chunks)
    context["tool_executions"] = list(run.tool_executions.all())
    context["checkpoints"] = list(run.checkpoints.order_by("id"))
    return context
