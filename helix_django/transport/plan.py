"""A planned chat-route response and the SSE frames it produces.

A :class:`ResponsePlan` is decided before any header is sent (so refusals keep their
status): ``204`` (nothing to resume) or ``200`` with a replayed prefix, a backlog read
from the stream, and optionally a live reader for the rest. :func:`plan_frames` turns
it into SSE frames through a :class:`~helix_django.transport.replay.ResponseFilter`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, NamedTuple

from helix_django.errors import HelixError, StreamDropError
from helix_django.metrics import delivery_observer
from helix_django.models import Run, RunStatus
from helix_django.streams.base import ENDED, PAUSED, BaseStreamManager, StoredChunk, StreamInfo
from helix_django.streams.reader import ResumableReader
from helix_django.transport.frames import reader_past_its_end
from helix_django.transport.plan_reads import Reread, is_visible, scan_run
from helix_django.transport.planner import recovering_drop
from helix_django.transport.replay import ABORT_CHUNK, DONE, ERROR, ResponseFilter, ending_error_body
from helix_django.transport.wire_ui import DONE as DONE_FRAME
from helix_django.transport.wire_ui import error_frame, frame


@dataclasses.dataclass
class ResponsePlan:
    """What one chat-route response sends."""

    status: int = 200
    """``200`` (a stream), ``202`` (the send was queued: :attr:`queued`) or ``204`` (nothing to resume)."""
    prefix: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Chunks sent first, without ``id:`` (the replayed prefix)."""
    backlog: list[StoredChunk] = dataclasses.field(default_factory=list)
    """Stored chunks already read, sent with their sequence as ``id:``."""
    reader: ResumableReader | None = None
    """Live reader continuing after the backlog (None: the run is over)."""
    filter: ResponseFilter | None = None
    run: Run | None = None
    """The run served; decides the terminal when the stream has none."""
    is_empty: bool = False
    """An empty ``200`` stream (a partial client-tool batch was stored; the run waits)."""
    reread: Reread | None = None
    """The replay's chunks after ``backlog``, read again while they are sent (:mod:`.plan_reads`)."""
    rest_is_visible: bool = False
    """Whether a chunk of ``reread`` is one a client would see."""
    queued: dict[str, Any] | None = None
    """The ``202`` body of a send queued behind the live run (multitask ``enqueue``)."""

    @property
    def has_visible_backlog(self) -> bool:
        """Whether the backlog (or the replay after it) holds a chunk a client would see
        (:func:`~helix_django.transport.plan_reads.is_visible`)."""
        return any(is_visible(chunk) for _seq, chunk in self.backlog) or self.rest_is_visible

    async def close(self) -> None:
        """Release the live reader of a plan that will not be sent (its kept waiter included)."""
        if self.reader is not None:
            await self.reader.close()

    @classmethod
    def nothing(cls) -> ResponsePlan:
        """Return the ``204`` plan."""
        return cls(status=204)


async def read_plan(
    manager: BaseStreamManager,
    stream_id: str,
    *,
    run: Run,
    from_sequence: int,
    response_filter: ResponseFilter,
    live: StreamInfo | None = None,
    follow: bool = False,
    prefix: list[dict[str, Any]] | None = None,
) -> ResponsePlan:
    """Read the run's chunks (for the filter's prescan), keep those after ``from_sequence``.

    With ``live`` (the stream's info, claimed by the run), or with ``follow`` (the caller
    knows the run claimed the stream: the info read with the chunks serves), a reader
    continues after the last chunk read. Raises StreamConnectionError when the stream
    cannot be read.
    """
    return await plan_from_chunks(
        manager,
        stream_id,
        None,
        run=run,
        from_sequence=from_sequence,
        response_filter=response_filter,
        live=live,
        follow=follow,
        prefix=prefix,
    )


async def plan_from_chunks(
    manager: BaseStreamManager,
    stream_id: str,
    first_page: tuple[list[StoredChunk], StreamInfo | None] | None,
    *,
    run: Run,
    from_sequence: int,
    response_filter: ResponseFilter,
    live: StreamInfo | None,
    follow: bool = False,
    prefix: list[dict[str, Any]] | None = None,
    subscribed: Any = None,
) -> ResponsePlan:
    """Plan from the run's chunks after ``min(run.start_sequence, from_sequence)``, read a page at a time.

    ``first_page``: the first page of them already read, with its info (None: read here).
    With ``live`` (the stream's info, claimed by the run) or ``follow``, a reader continues
    after the last chunk read, with the info of the last page; ``subscribed``, a waiter
    subscribed before the first read, is handed to it
    (:class:`~helix_django.streams.reader.ResumableReader`), so its first wait reads nothing.
    The plan keeps at most ``HELD_CHUNKS`` chunks to send (:func:`~.plan_reads.scan_run`).
    """
    following = live is not None or follow
    try:
        scanned = await scan_run(
            manager,
            stream_id,
            after=min(run.start_sequence, from_sequence),
            from_sequence=from_sequence,
            response_filter=response_filter,
            stop_at_head=following,
            first_page=first_page,
        )
    except BaseException:
        if subscribed is not None:
            subscribed.cancel()
        raise
    reader = None
    if following:
        info = scanned.info if scanned.info is not None else live
        reader = ResumableReader(
            manager, stream_id, from_sequence=scanned.last, wait_for_live=False, info=info, subscribed=subscribed
        )
    elif subscribed is not None:
        subscribed.cancel()
    return ResponsePlan(
        prefix=list(prefix or []),
        backlog=scanned.kept,
        reader=reader,
        filter=response_filter,
        run=run,
        reread=scanned.reread,
        rest_is_visible=scanned.reread is not None and scanned.has_visible,
    )


def _chunk_frames(response_filter: ResponseFilter, sequence: int, chunk: dict[str, Any]) -> list[bytes]:
    out = []
    for ui in response_filter.accept(sequence, chunk):
        out.append(frame(ui, sequence=sequence, event="error" if ui.get("type") == "error" else None))
    return out


class _RunEnding(NamedTuple):
    """What the terminal of a response needs of the run it serves (not the whole row:)."""

    status: str
    is_live: bool
    error_detail: dict[str, Any] | None

    @classmethod
    def of(cls, run: Run | None) -> _RunEnding | None:
        return None if run is None else cls(str(run.status), run.is_live, run.error_detail())


def _final_error(run: _RunEnding | None) -> dict[str, Any]:
    if run is not None and not run.is_live and run.status != RunStatus.COMPLETED:
        detail = run.error_detail or {}
        return {
            "error": detail.get("message") or "The generation did not finish",
            "code": detail.get("code") or f"run_{run.status}",
            "retryable": bool(detail.get("retryable")),
        }
    return StreamDropError(cause="reader_ended").to_body()


#: Frames ready at the same moment (a backlog, the chunks one read returned) leave in one
#: body of up to this many bytes: a reader that fell behind catches up in a few sends,
#: not one per chunk (daphne's cost is per send; docs/performance.md).
BODY_BYTES = 64 * 1024


async def plan_frames(plan: ResponsePlan, *, first_part_at_once: bool = False) -> AsyncIterator[bytes]:
    """Yield the SSE body of ``plan`` in parts: prefix, backlog, live tail, then the terminal.

    Each part is one or more whole frames: every frame ready before the reader would
    wait (up to :data:`BODY_BYTES`), so nothing ready is held back while the reader
    waits for a write. With ``first_part_at_once`` the first part is yielded before the
    reader is first awaited, empty when nothing is ready (the chat route's
    ``StreamedResponse.run(first_part_ready=True)`` sends it with the response's opening).
    ``[DONE]`` only after a real terminal; a failed stream ends with its ``error`` chunk;
    a read failure or a reader that ends without a terminal ends with one ``error``
    chunk carrying a typed, retryable body (a drop, never a clean finish).
    """
    if plan.is_empty:
        return
    response_filter = plan.filter or ResponseFilter(run_id=None)
    body = _Body([frame(chunk) for chunk in plan.prefix])
    # Sent once: an open response keeps none of its replayed chunks, nor the run's row (idle memory).
    backlog, plan.prefix, plan.backlog = plan.backlog, [], []
    reread, plan.reread = plan.reread, None
    ending, plan.run = _RunEnding.of(plan.run), None
    reader = plan.reader
    del plan  # nor the plan itself: the frames keep what they send
    observe_lag = delivery_observer("chat") if reader is not None else None
    stored: StoredChunk | None = None
    opened = not first_part_at_once
    try:
        async with contextlib.aclosing(_replayed(backlog, reread)) as replayed:
            del backlog, reread
            async for stored in replayed:
                body.add(_chunk_frames(response_filter, *stored))
                if response_filter.terminal:
                    break
                if body.is_full:
                    opened = True
                    yield body.take()
        while reader is not None and not response_filter.terminal:
            stored = None  # parked on the reader, the response holds no chunk
            if (body or not opened) and not reader.ready:
                opened = True
                yield body.take()  # the reader may wait now: what is ready goes out first
            try:
                stored = await anext(reader)
            except StopAsyncIteration:
                follow = await reader_past_its_end(reader, {})
                if isinstance(follow, str):
                    break  # its end, or still fenced: the drop (_terminal_frames)
                reader = follow  # past a recovery's fence: on to the ending it decided
                continue
            if observe_lag is not None:
                observe_lag(stored[1])
            body.add(_chunk_frames(response_filter, *stored))
            if body.is_full:
                yield body.take()
    except HelixError as exc:
        body.add([error_frame(exc.to_body())])
        yield body.take()
        return
    finally:
        if reader is not None:
            await reader.close()
    body.add(_terminal_frames(ending, response_filter, reader.last_info if reader is not None else None, reader))
    if body:
        yield body.take()


async def _replayed(backlog: list[StoredChunk], reread: Reread | None) -> AsyncGenerator[StoredChunk, None]:
    """The replayed chunks: the plan's backlog (at most ``HELD_CHUNKS``), then its reread a page at a time."""
    for stored in backlog:
        yield stored
    if reread is not None:
        async for page in reread.pages():
            for stored in page:
                yield stored


def _terminal_frames(
    run: _RunEnding | None, response_filter: ResponseFilter, info: StreamInfo | None, reader: ResumableReader | None
) -> list[bytes]:
    """The frames that end a response the filter did not end with an ``error`` chunk (ending table, docs/transport.md).

    A clean terminal of the run is ``[DONE]`` (after ``abort`` for a cancelled one, which
    the filter sent); a run that ended failed or interrupted with no stored ``error``
    chunk gets its typed error; a stream that ended without the run's ``helix-run-end``
    is told from the stream's own status. Anything else is a drop (retryable), a paused
    stream included: a run that waits for the browser wrote its ``suspended`` end first
    (the filter's ``[DONE]``), so a pause without it is a recovery fencing the run's
    writer (recovery/fences.py, ``fence_writer``): :func:`plan_frames` follows the stream to
    the ending the recovery decides (``frames.reader_after_fence``), and a fence still
    standing after that wait ends here (``cause: run_recovering``, as on the raw stream
    route and the WebSocket: :mod:`.frames`).
    """
    if response_filter.terminal == ERROR:
        return []
    if response_filter.terminal == DONE:
        return [DONE_FRAME]
    if response_filter.expect_error:
        return [error_frame(ending_error_body(response_filter.end_status or "", response_filter.run_id))]
    if info is not None and info.status == ENDED:
        abort = [frame(dict(ABORT_CHUNK))] if info.end_status == "cancelled" else []
        return [*abort, DONE_FRAME]
    if reader is None:
        if run is None or run.status == RunStatus.COMPLETED:  # committed history, nothing pending
            return [DONE_FRAME]
        if run.status == RunStatus.CANCELLED:
            return [frame(dict(ABORT_CHUNK)), DONE_FRAME]
    if info is not None and info.status == PAUSED:  # no suspended end: a fence (frames.is_paused_by_its_run)
        return [error_frame(recovering_drop().to_body())]
    return [error_frame(_final_error(run))]


class _Body:
    """SSE frames waiting to be sent as one part of the body."""

    def __init__(self, frames: list[bytes]) -> None:
        self._frames = frames
        self._size = sum(len(item) for item in frames)

    def __bool__(self) -> bool:
        return bool(self._frames)

    @property
    def is_full(self) -> bool:
        return self._size >= BODY_BYTES

    def add(self, frames: list[bytes]) -> None:
        self._frames.extend(frames)
        self._size += sum(len(item) for item in frames)

    def take(self) -> bytes:
        part, self._frames, self._size = b"".join(self._frames), [], 0
        return part
