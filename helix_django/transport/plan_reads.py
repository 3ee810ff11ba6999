"""The reads of a chat-route plan, a page at a time: what a response holds is bounded, not its run.

A plan needs every chunk of its run from the run's start for the response filter's prescan
(:meth:`~helix_django.transport.replay.ResponseFilter.prescan`), and sends those after its
cursor. :func:`scan_run` reads them in pages of :data:`PAGE_CHUNKS`, prescans each page and
keeps at most :data:`HELD_CHUNKS` of those to send; the rest of a longer replay is a
:class:`Reread`, read again a page at a time while the response sends it. Before, a plan
read and kept the whole run, so a client that opened a resume of a long run and did not
read held the run in the process (four idle resumes of an 8 MB run: +67 MB under daphne;
docs/deploy.md, "A client that stops reading").
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from helix_django.errors import StreamDropError
from helix_django.streams.base import BaseStreamManager, StoredChunk, StreamInfo
from helix_django.transport.replay import ResponseFilter

#: Chunks one read of a plan asks the stream manager for.
PAGE_CHUNKS = 500
#: Chunks after the cursor a plan keeps to send; a longer replay is read again as it is sent.
HELD_CHUNKS = 500


def is_visible(chunk: dict[str, Any]) -> bool:
    """Whether a client would see ``chunk``: not an internal one, or a run end it is told
    (``abort`` of a cancelled run, the error of a failed one)."""
    kind = chunk.get("type", "")
    if kind == "helix-run-end":
        return chunk.get("status") not in ("completed", "suspended")
    return not kind.startswith("helix-")


@dataclasses.dataclass
class Reread:
    """Chunks of a replay a plan did not keep: sequences in ``(after, until]``, read again when sent."""

    manager: BaseStreamManager
    stream_id: str
    after: int
    until: int

    async def pages(self) -> AsyncIterator[list[StoredChunk]]:
        """Yield the chunks in pages of :data:`PAGE_CHUNKS`, in order.

        Raises StreamConnectionError for a failed read, and StreamDropError (retryable:
        resume from the cursor) when the stream no longer holds them (purged since the plan).
        """
        after = self.after
        while after < self.until:
            page, _info = await self.manager.read_after(self.stream_id, after, limit=PAGE_CHUNKS)
            page = [stored for stored in page if stored[0] <= self.until]
            if not page or page[0][0] != after + 1:
                raise StreamDropError(cause="replay_incomplete")
            yield page
            after = page[-1][0]


@dataclasses.dataclass
class Scanned:
    """What :func:`scan_run` read: the chunks kept to send, the rest to read again, where it stopped."""

    kept: list[StoredChunk]
    """Chunks after the cursor, at most :data:`HELD_CHUNKS`, oldest first."""
    reread: Reread | None
    """The replay's chunks after ``kept``, when there were more."""
    last: int
    """The sequence of the last chunk read (the cursor when none was)."""
    info: StreamInfo | None
    """The stream's info read with the last page."""
    has_visible: bool
    """Whether any chunk after the cursor (kept or not) is one a client would see."""


async def scan_run(
    manager: BaseStreamManager,
    stream_id: str,
    *,
    after: int,
    from_sequence: int,
    response_filter: ResponseFilter,
    stop_at_head: bool,
    first_page: tuple[list[StoredChunk], StreamInfo | None] | None = None,
) -> Scanned:
    """Read the stream's chunks after ``after`` page by page; prescan each; keep what is sent after ``from_sequence``.

    Reads until a page is empty or, with ``stop_at_head``, reaches the head its info
    reports (a live reader follows from there), as ``read_all``/``read_backlog`` do.
    ``first_page``: a page already read after ``after`` (with its info). Raises
    StreamConnectionError when the stream cannot be read.
    """
    kept: list[StoredChunk] = []
    spilled_after: int | None = None
    has_visible = False
    last = max(after, from_sequence)
    page, info = first_page if first_page is not None else await manager.read_after(stream_id, after, limit=PAGE_CHUNKS)
    while True:
        response_filter.prescan(page)
        for stored in page:
            if stored[0] <= from_sequence:
                continue
            has_visible = has_visible or is_visible(stored[1])
            if spilled_after is None and len(kept) >= HELD_CHUNKS:
                spilled_after = kept[-1][0]
            if spilled_after is None:
                kept.append(stored)
        if page:
            last = max(last, page[-1][0])
        at_head = info is None or (bool(page) and page[-1][0] >= info.head_sequence)
        if not page or (stop_at_head and at_head):
            break
        page, info = await manager.read_after(stream_id, page[-1][0], limit=PAGE_CHUNKS)
    reread = None if spilled_after is None else Reread(manager, stream_id, spilled_after, last)
    return Scanned(kept=kept, reread=reread, last=last, info=info, has_visible=has_visible)
