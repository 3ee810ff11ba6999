"""Raw ASGI HTTP plumbing: headers, the bounded body read, and a streamed SSE response.

:class:`StreamedResponse` writes frames from a producer while it watches ``receive()``
for ``http.disconnect``: a client that goes away cancels only its own producer (the
run is never touched), and an idle stream gets a ``: keep-alive`` comment
every ``HEARTBEAT_SECONDS`` so proxies keep the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from django.utils.translation import gettext_lazy

from helix_django.errors import ValidationError
from helix_django.ids import parse_cursor
from helix_django.limits import declared_body_bytes, request_too_large
from helix_django.transport.responses import Send, log_unexpected
from helix_django.transport.wire_ui import KEEP_ALIVE, STREAM_OPEN

Receive = Callable[[], Awaitable[dict[str, Any]]]


class ClientDisconnected(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The client went away before the request was complete."""


def header(scope: dict[str, Any], name: str) -> str | None:
    """Return the first value of header ``name`` (lower case) or None.

    Raises ValidationError (``cause: header``) for a value that is not Latin-1 text.
    """
    key = name.encode("latin-1")
    for raw_name, raw_value in scope.get("headers", ()):
        if raw_name.lower() == key:
            try:
                return raw_value.decode("latin-1").strip()
            except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
                raise ValidationError(gettext_lazy("Invalid header"), cause="header") from exc
    return None


def single_header(scope: dict[str, Any], name: str) -> str | None:
    """Return the value of single-valued header ``name`` (lower case) or None, refusing it given twice.

    Raises ValidationError (400, ``cause: "duplicate_header"``, ``header``: the name) when
    the request carries ``name`` more than once: which copy counts would be a guess.
    """
    key = name.encode("latin-1")
    if sum(1 for raw_name, _value in scope.get("headers", ()) if raw_name.lower() == key) > 1:
        raise ValidationError(
            gettext_lazy("A single-valued header was given more than once"), cause="duplicate_header", header=name
        )
    return header(scope, name)


def query_param(scope: dict[str, Any], name: str) -> str | None:
    """Return the first value of query parameter ``name`` or None."""
    raw = scope.get("query_string", b"").decode("latin-1")
    values = parse_qs(raw, keep_blank_values=True).get(name)
    return values[0] if values else None


def request_cursor(scope: dict[str, Any]) -> int | None:
    """Return the client's resume cursor (the last sequence it holds), or None: one rule on every route.

    ``X-Resume-From-Sequence`` and ``Last-Event-ID`` are both the client's own state: when
    both are present their values must agree, else ValidationError (400, ``cause:
    cursor_conflict``). The ``resumeFromSequence`` query parameter is a fallback read only
    when neither header is present (a browser ``EventSource`` sends ``Last-Event-ID`` on
    its reconnect, newer than the cursor in its URL). A malformed value is ValidationError
    (``cause: cursor``). Table: docs/transport.md, "Cursors".
    """
    explicit = {parse_cursor(single_header(scope, name)) for name in ("x-resume-from-sequence", "last-event-id")}
    explicit.discard(None)
    if len(explicit) > 1:
        raise ValidationError(
            gettext_lazy("X-Resume-From-Sequence and Last-Event-ID disagree"), cause="cursor_conflict"
        )
    if explicit:
        return explicit.pop()
    return parse_cursor(query_param(scope, "resumeFromSequence"))


async def read_body(scope: dict[str, Any], receive: Receive, *, max_bytes: int) -> bytes:
    """Read the whole request body, refusing more than ``max_bytes``.

    A ``Content-Length`` over the limit is refused before reading (413
    ``validation_payload_too_large``, ``cause: request_body``, ``limitBytes``, ``sizeBytes``);
    a chunked body is refused as soon as it passes the limit. Raises ValidationError for
    a malformed ``Content-Length`` and ClientDisconnected when the client leaves.
    """
    declared = declared_body_bytes(header(scope, "content-length"))
    if declared is not None and declared > max_bytes:
        raise request_too_large(declared, limit_bytes=max_bytes)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        body = message.get("body", b"")
        size += len(body)
        if size > max_bytes:
            raise request_too_large(size, limit_bytes=max_bytes)
        chunks.append(body)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def wait_for_disconnect(receive: Receive) -> None:
    """Return once the client disconnected (the body must have been read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class DisconnectWatch:
    """One task for the life of a request that returns once the client disconnected (its body read).

    The planning of a response (:func:`run_until_disconnect`) and the response itself
    (:class:`StreamedResponse`) share it: opening a resume starts one watcher, not one
    per phase (tasks per open). :meth:`close` ends it.
    """

    def __init__(self, receive: Receive) -> None:
        self.task: asyncio.Task[None] = asyncio.ensure_future(wait_for_disconnect(receive))

    @property
    def disconnected(self) -> bool:
        """Whether the client went away."""
        return self.task.done() and not self.task.cancelled() and self.task.exception() is None

    async def close(self) -> None:
        """Stop watching (a no-op once the client went away, or once its ``receive()`` failed)."""
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


async def run_until_disconnect(watch: DisconnectWatch, work: Awaitable[Any]) -> tuple[bool, Any]:
    """Run ``work`` until it finishes or the client disconnects (``watch``); return ``(disconnected, result)``.

    A disconnect cancels ``work`` (callers shield what must not be cancelled, such as
    ``execute()``). Exceptions of ``work`` propagate. The watch goes on (the response reuses it).
    """
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait({task, watch.task}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        return False, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return True, None


class StreamedResponse:
    """An SSE response fed by an async iterator of frames (bytes).

    The response's own task pumps frames straight to ``send`` (no queue, no task per
    frame); one task watches ``receive()`` for the disconnect and cancels the pump when it
    comes; a timer (no task while idle) sends a ``: keep-alive`` comment when nothing was
    sent for ``heartbeat_seconds``. Sends never overlap (:meth:`_send_body`), so a
    heartbeat never lands inside a frame. An idle open response is so one parked task and one timer
    beside the server's own (idle memory per response).
    """

    def __init__(
        self, send: Send, receive: Receive, *, heartbeat_seconds: float, watch: DisconnectWatch | None = None
    ) -> None:
        self.send = send
        self.receive = receive
        self.heartbeat_seconds = heartbeat_seconds
        self.watch = watch
        """The request's disconnect watch, if the route started one while planning (else the response starts it)."""
        self.disconnected = False
        """Set once the client went away (its producer was cancelled)."""
        self._sending = False
        """A body is being sent (the pump's or a keep-alive): a heartbeat then waits for the next idle period."""
        self._last_sent = 0.0
        self._pumping: asyncio.Task[Any] | None = None
        """The task pumping frames, while it does: a disconnect cancels it."""
        self._timer: asyncio.TimerHandle | None = None
        self._beat: asyncio.Future[None] | None = None
        """A keep-alive being sent, if any."""

    async def run(
        self,
        status: int,
        headers: list[tuple[bytes, bytes]],
        frames: AsyncIterator[bytes],
        *,
        first_part_ready: bool = False,
    ) -> None:
        """Send the headers, then every frame as it comes, heartbeats on idle, until the end or a disconnect.

        With ``first_part_ready`` the first part of ``frames`` is ready at once (the route's
        replayed backlog, possibly empty: its iterator yields it before it first waits) and
        goes out with the ``: stream-open`` comment in one body: the headers and the first
        frames take two ASGI sends, not three (CPU to open a resume).
        """
        watcher = (self.watch or DisconnectWatch(self.receive)).task
        self.watch = None
        try:
            await self.send({"type": "http.response.start", "status": status, "headers": headers})
            del headers  # an open response keeps no header list (idle memory)
            opening = await _first_part(frames) if first_part_ready else b""
            await self._send_body(STREAM_OPEN + opening)
            del opening
            watcher.add_done_callback(self._on_disconnect)  # called soon if the client already left
            self._arm(self.heartbeat_seconds)
            self._pumping = asyncio.current_task()
            try:  # the pump, in the response's own frame (no coroutine of its own while idle)
                async for item in frames:
                    if item:  # an empty part: nothing was ready (the opening of a route with no backlog)
                        await self._send_body(item)
                    del item  # waiting for the next frame, the response holds no sent one
            except Exception as exc:  # the frame source renders its own errors; this is a last resort
                log_unexpected("stream producer", exc)
            finally:
                self._pumping = None
                await _aclose(frames)
            self._stop_heartbeats()
            await self._send_body(b"", more_body=False)
        except asyncio.CancelledError:
            if not self.disconnected:
                raise
            _uncancel()  # our own cancellation (the client left), not the server's: the response ends
        finally:
            self._stop_heartbeats()
            watcher.remove_done_callback(self._on_disconnect)
            for task in (self._beat, watcher):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    def _on_disconnect(self, watcher: asyncio.Future[None]) -> None:
        if watcher.cancelled() or watcher.exception() is not None:
            return
        self.disconnected = True
        if self._pumping is not None:
            self._pumping.cancel()

    async def _send_body(self, body: bytes, *, more_body: bool = True) -> None:
        """Send one body message; sends never overlap.

        The pump's only rival is a keep-alive: the pump waits for one in flight, and a
        heartbeat never starts one while a body is being sent. No lock: an ``asyncio.Lock``
        is 720 bytes an idle response would keep.
        """
        beat = self._beat
        if beat is not None and not beat.done() and beat is not asyncio.current_task():
            await asyncio.wait((beat,))
        self._sending = True
        try:
            await self.send({"type": "http.response.body", "body": body, "more_body": more_body})
            self._last_sent = asyncio.get_running_loop().time()
        finally:
            self._sending = False

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._heartbeat)

    def _heartbeat(self) -> None:
        idle = asyncio.get_running_loop().time() - self._last_sent
        if idle < self.heartbeat_seconds or self._sending or (self._beat is not None and not self._beat.done()):
            self._arm(max(self.heartbeat_seconds - idle, 0.001))
            return
        self._beat = asyncio.ensure_future(self._send_body(KEEP_ALIVE))
        self._beat.add_done_callback(_retrieve)
        self._arm(self.heartbeat_seconds)

    def _stop_heartbeats(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def _aclose(frames: AsyncIterator[bytes]) -> None:
    """Close ``frames`` if it can be (its own failure is not the response's)."""
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


async def _first_part(frames: AsyncIterator[bytes]) -> bytes:
    """Return the first part of ``frames`` (b"" when there is none; a failing source is logged and ends)."""
    try:
        return await anext(frames)
    except StopAsyncIteration:
        return b""
    except Exception as exc:  # the frame source renders its own errors; this is a last resort
        log_unexpected("stream producer", exc)
        return b""


def _uncancel() -> None:
    """Withdraw the current task's pending cancellation request (Python 3.11+; a no-op before)."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()


def _retrieve(task: asyncio.Future[None]) -> None:
    """Read a finished keep-alive's outcome, so a send to a gone client is never logged as unretrieved."""
    if not task.cancelled():
        task.exception()
