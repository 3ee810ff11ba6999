"""What the run change page shows: partial text, a short stream timeline, tool and checkpoint lists.

Everything is read with a constant number of queries, whatever the number of chunks or
tool executions (the stream manager reads chunks in batches of 1 000).
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import datetime, timezone
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone as dj_timezone
from django.utils.translation import gettext as _

from helix_django.admin import display
from helix_django.errors import HelixError
from helix_django.models import Run
from helix_django.recovery.partial import apply_chunks, aread_run_chunks, base_message, current_row, text_chars
from helix_django.streams.writer import WRITTEN_AT_KEY

#: Timeline entries shown at most (runs of the same chunk type are folded into one entry).
MAX_TIMELINE_ENTRIES = 40


#: A gap between two chunks longer than this is a stall: it starts a new timeline entry, shown in red.
STALL_MS = 5000
#: Chunk types whose first occurrence is the run's first token.
TOKEN_TYPES = frozenset({"text-delta", "reasoning-delta", "tool-input-start", "tool-input-available"})


@dataclasses.dataclass
class TimelineEntry:
    """One folded run of chunks of the same type: ``first``..``last`` sequence, ``count`` chunks.

    ``at_ms`` is when the first of them was stored (epoch ms, None for chunks written
    without a time); ``gap_ms`` the time since the previous entry's last chunk.
    """

    type: str
    first: int
    last: int
    count: int
    note: str = ""
    at_ms: int | None = None
    last_ms: int | None = None
    gap_ms: int | None = None

    @property
    def at(self) -> datetime | None:
        """The time of the entry's first chunk (aware, UTC)."""
        return None if self.at_ms is None else datetime.fromtimestamp(self.at_ms / 1000, tz=timezone.utc)

    @property
    def clock(self) -> str:
        """The time of the entry's first chunk in the current time zone, to the millisecond ('' when unknown)."""
        at = self.at
        return "" if at is None else f"{dj_timezone.localtime(at):%H:%M:%S.%f}"[:-3]

    @property
    def last_clock(self) -> str:
        """The time of the entry's last chunk, as :attr:`clock`; '' for one chunk or an unknown time."""
        if self.count == 1 or self.last_ms is None or self.last_ms == self.at_ms:
            return ""
        at = datetime.fromtimestamp(self.last_ms / 1000, tz=timezone.utc)
        return f"{dj_timezone.localtime(at):%H:%M:%S.%f}"[:-3]

    @property
    def gap(self) -> str:
        """The gap before this entry, as a short duration ('' when unknown)."""
        return "" if self.gap_ms is None else "+" + display.duration(self.gap_ms / 1000)

    @property
    def is_stall(self) -> bool:
        """Whether nothing was stored for longer than :data:`STALL_MS` before this entry."""
        return self.gap_ms is not None and self.gap_ms > STALL_MS


def _note(kind: str, chunk: dict[str, Any]) -> str:
    if kind == "error":
        return str((chunk.get("helixError") or {}).get("code", ""))
    if kind == "helix-run-end":
        return str(chunk.get("status", ""))
    if kind in ("tool-input-available", "tool-output-available", "tool-output-error"):
        return str(chunk.get("toolName") or chunk.get("toolCallId", ""))
    return ""


def _stored_at(chunks: list[tuple[int, dict[str, Any]]], ended_ms: int | None) -> list[int | None]:
    """Each chunk's store time (epoch ms): its ``_at``, else ``ended_ms`` for the chunks after the last timed one.

    The stream writer stamps ``_at`` on every chunk it flushes; an ending appended outside
    it (the ``error`` chunk a failed stream gets, recovery's closing chunks, a completion's
    ``finish``) carries none and is stored when the run ended (``Run.finished_at``).
    """
    times = [at if isinstance(at := chunk.get(WRITTEN_AT_KEY), int) else None for _, chunk in chunks]
    last_timed = max((i for i, at in enumerate(times) if at is not None), default=-1)
    if ended_ms is not None:
        for i in range(last_timed + 1, len(times)):
            times[i] = max(ended_ms, times[last_timed] or 0) if last_timed >= 0 else ended_ms
    return times


def build_timeline(
    chunks: list[tuple[int, dict[str, Any]]], *, ended_ms: int | None = None
) -> tuple[list[TimelineEntry], int]:
    """Fold consecutive chunks of one type; return (the last ``MAX_TIMELINE_ENTRIES`` entries, entries omitted).

    A stall (a gap over :data:`STALL_MS`) always starts a new entry. Notes carry only types,
    statuses and error codes, never text. ``ended_ms``: when the run ended (epoch ms), the
    time of its closing chunks stored without one (:func:`_stored_at`).
    """
    entries: list[TimelineEntry] = []
    previous_ms: int | None = None
    for (sequence, chunk), at_ms in zip(chunks, _stored_at(chunks, ended_ms), strict=True):
        kind = chunk.get("type", "?")
        note = _note(kind, chunk)
        gap = at_ms - previous_ms if at_ms is not None and previous_ms is not None else None
        last = entries[-1] if entries else None
        if last and last.type == kind and not note and not last.note and not (gap is not None and gap > STALL_MS):
            last.last, last.count = sequence, last.count + 1
            last.last_ms = at_ms if at_ms is not None else last.last_ms
        else:
            entries.append(TimelineEntry(kind, sequence, sequence, 1, note, at_ms, at_ms, gap))
        previous_ms = at_ms if at_ms is not None else previous_ms
    omitted = max(0, len(entries) - MAX_TIMELINE_ENTRIES)
    return entries[omitted:], omitted


def timings(run: Run, chunks: list[tuple[int, dict[str, Any]]]) -> list[tuple[str, str]]:
    """Return ``[(label, value)]``: waited to start, time to first token, longest stall, duration.

    Durations come from the run's own times and the chunks' store times; "—" when unknown.
    """
    times = [(c.get("type"), written_at) for _, c in chunks if isinstance(written_at := c.get(WRITTEN_AT_KEY), int)]
    started = run.started_at or run.created_at
    first_token = next((ms for kind, ms in times if kind in TOKEN_TYPES), None)
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(times)]
    end = run.finished_at or (run.last_event_at if run.is_terminal else None)

    def since_start(ms: int | None) -> str:
        return "—" if ms is None else display.duration(max(0.0, ms / 1000 - started.timestamp()))

    return [
        (_("Waited to start"), display.duration(max(0.0, (started - run.created_at).total_seconds()))),
        (_("Time to first token"), since_start(first_token)),
        (_("Longest gap between chunks"), display.duration(max(gaps) / 1000) if gaps else "—"),
        (_("Duration"), display.duration((end - started).total_seconds()) if end else _("still running")),
    ]


def _live_message(run: Run, chunks: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    # The same rebuild as the relaunch scan, with the ORM reads done here (sync).
    base, after = base_message(run)
    return apply_chunks(base, run.response_message_id, [(s, c) for s, c in chunks if s > after]).snapshot(close=True)


def shown_chars(run: Run) -> int:
    """Return the characters of the response the run page shows: live text so far, or ``partial_chars``.

    Both count text and reasoning (:func:`~helix_django.recovery.partial.text_chars`), so the
    confirmation pages and the run page never disagree. 0 when the stream cannot be read.
    """
    if not run.is_live:
        return run.partial_chars
    try:
        return text_chars(_live_message(run, async_to_sync(aread_run_chunks)(run)))
    except HelixError:
        return 0


def change_page_context(run: Run) -> dict[str, Any]:
    """Return the extra context of the run change page: partial text, timeline, tools, checkpoints."""
    context: dict[str, Any] = {"stream_error": ""}
    try:
        chunks = async_to_sync(aread_run_chunks)(run)
        message = _live_message(run, chunks) if run.is_live else current_row(run)
        if message is None and chunks:
            # Its row went on to a later run (Continue takes over the same message): rebuilt
            # from this run's own chunks, as for a live run, so the count is its partial_chars.
            message = _live_message(run, chunks)
    except HelixError as exc:
        chunks, message = [], current_row(run)
        context["stream_error"] = exc.code
    parts = (message or {}).get("parts") or []
    # The count shown is text_chars (text and reasoning, the rule of Run.partial_chars), so both
    # are shown: the count always matches the characters on the page.
    context["response_text"] = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    context["response_reasoning"] = "".join(p.get("text", "") for p in parts if p.get("type") == "reasoning")
    context["response_chars"] = text_chars(message) if message else 0
    context["response_is_partial"] = run.status != "completed"
    end = run.finished_at or (run.last_event_at if run.is_terminal else None)
    ended_ms = round(end.timestamp() * 1000) if end is not None else None
    context["timeline"], context["timeline_omitted"] = build_timeline(chunks, ended_ms=ended_ms)
    context["timings"] = timings(run, chunks)
    context["chunk_count"] = len(chunks)
    context["tool_executions"] = list(run.tool_executions.all())
    context["checkpoints"] = list(run.checkpoints.order_by("id"))
    return context
