"""WebSocket access to a session's stream (DESIGN, "Chat route").

Route ``ws/<prefix>sessions/<session_id>/`` (behind the origin check of
:mod:`helix_django.transport.routing`). The consumer carries helix's policy itself, however
a host routes it: the handshake is admitted as a ``GET`` of the chat route and every client
message as the request it stands for, with the same authentication, permission and
throttle classes and the host's https requirement
(:func:`helix_django.transport.auth.authenticate_socket`). Client messages (JSON objects):

- ``{"type": "resume", "from_sequence": N}``: stream the session stream's chunks with
  sequence > N, then one terminal frame. A new ``resume`` replaces the running one and
  continues after the highest sequence this socket already delivered: one socket never
  carries a sequence twice (docs/transport.md, "Cursors");
- ``{"type": "send", "messages": [UIMessage], "request_key"?, "trigger"?, "messageId"?}``:
  execute a send (as the chat route does); answers ``{"type": "run", "runId",
  "responseMessageId", "fromSequence", "isDuplicate"}`` and streams the run from there;
- ``{"type": "cancel", "run_id"?}``: cancel the run (default: the current one); answers
  ``{"type": "cancelled", "runId", "status"}``.

Server frames: ``{"type": "chunk", "sequence", "chunk"}``, ``{"type": "end", "status"}``,
``{"type": "fail", "error", "errorDetail"?, "recoverable"}`` (see
:mod:`helix_django.transport.frames`) and typed errors ``{"type": "error", ...body}``.
A refused handshake (401, 403, 429, and the 404 of a session the caller does not own or
that does not exist) gets its typed error frame and the close code ``4000 + http_status``;
a refused message gets its typed error frame and the socket stays open.
A disconnect stops this socket's reader, never the run.

Bounded work: a message longer than ``MAX_REQUEST_BYTES`` is refused by its
length (413 frame), its JSON is decoded by :func:`helix_django.jsonbody.load_json` (NUL
and lone surrogates refused) and a send's body is validated on the validation worker
thread, as the chat route's.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import DisallowedHost
from django.utils.translation import gettext_lazy

from helix_django.access.ownership import get_owned_session
from helix_django.conf import helix_settings
from helix_django.deadlines import completes_despite_cancel
from helix_django.errors import RouteNotFoundError, SessionNotFoundError, ValidationError, as_helix_error
from helix_django.ids import parse_cursor, validate_request_key, validate_session_id
from helix_django.jsonbody import load_json, run_off_loop
from helix_django.limits import request_too_large
from helix_django.models import ChatSession
from helix_django.orm import sync_to_async
from helix_django.runtime.enqueue import QueuedSend
from helix_django.runtime.executor import get_executor
from helix_django.runtime.multitask import parse_multitask
from helix_django.streams import get_stream_manager
from helix_django.streams.reader import ResumableReader
from helix_django.transport.auth import Identity, authenticate_socket
from helix_django.transport.chat_body import KNOWN_FIELDS, validate_body
from helix_django.transport.frames import check_cursor, is_purged, missing_stream_error, stream_frames
from helix_django.transport.host import handshake_language
from helix_django.transport.responses import log_unexpected
from helix_django.transport.wire_ws import cancelled_frame, error_frame, queued_frame, run_frame


def _admit(scope: dict[str, Any]) -> tuple[Identity, ChatSession]:
    """The handshake's synchronous part (the ORM's thread): helix's policy, then the owned session.

    Returns ``(identity, session)``; raises DisallowedHost, the policy's refusals
    (:func:`~helix_django.transport.auth.authenticate_socket`) or SessionNotFoundError.
    """
    identity = authenticate_socket(scope)
    session_id = validate_session_id(scope["url_route"]["kwargs"]["session_id"])
    return identity, get_owned_session(session_id, identity.owner)


class SessionStreamConsumer(AsyncJsonWebsocketConsumer):
    """One socket subscribed to one owned session's stream (see the module docstring)."""

    channel_layer_alias = None  # type: ignore[assignment]
    """No channel of its own on the layer: the socket is woken by the stream manager (its broadcast
    crosses processes), so it holds no layer connection and waits on no blocking receive, which
    channels_redis under redis-py 8's 5 s socket timeout turned into a crash every 5 s (1011)."""

    session: ChatSession | None = None
    identity: Identity | None = None
    """Who the handshake admitted (helix's policy)."""
    reader_task: asyncio.Task[None] | None = None
    delivered_sequence: int = 0
    """The highest sequence this socket sent; no later reader sends it, or any below it, again."""

    language: str | None = None
    """The handshake's language, as the host's ``LocaleMiddleware`` picks it (None: the active one)."""

    async def connect(self) -> None:
        """Admit the socket under helix's policy and find its owned session, or refuse it.

        A ``Host`` that ``ALLOWED_HOSTS`` refuses is a refused handshake (403), as Django
        answers it; any other refusal (401, 403, 429, the 404 of a session the caller does not
        own) is accepted, then answered with its typed frame and the close code ``4000 + status``.
        """
        self.language = handshake_language(self.scope)
        try:
            self.identity, self.session = await sync_to_async(_admit)(self.scope)
        except DisallowedHost:
            await self.close()
            return
        except Exception as exc:
            await self.accept()
            await self.refuse(exc)
            return
        await self.accept()

    async def refuse(self, exc: BaseException) -> None:
        """Send the typed error frame of ``exc`` and close with ``4000 + status``."""
        log_unexpected("websocket", exc)
        error = as_helix_error(exc)
        await self.send_json(self._error_frame(error))
        await self.close(code=4000 + error.status)

    def _error_frame(self, error: BaseException) -> dict[str, Any]:
        """Return the typed error frame of ``error``, its message in the handshake's language."""
        return error_frame(error, self.language)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Decode one JSON message; malformed or oversized input answers a typed error frame."""
        if self.session is None:
            return
        text = text_data or ""
        limit = helix_settings.MAX_REQUEST_BYTES
        try:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise request_too_large(size, limit_bytes=limit)
            content = load_json(text, known_fields=KNOWN_FIELDS | {"request_key", "from_sequence", "run_id"})
        except ValidationError as exc:
            await self.send_error(exc)
            return
        await self.receive_json(content)

    def _session(self) -> ChatSession:
        """Return the socket's session; raise SessionNotFoundError if connect() found none.

        Not expected: :meth:`receive` drops every message until connect() found the session.
        """
        if self.session is None:
            raise SessionNotFoundError()
        return self.session

    def _identity(self) -> Identity:
        """Return who the handshake admitted; raise SessionNotFoundError if connect() admitted nobody."""
        if self.identity is None:
            raise SessionNotFoundError()
        return self.identity

    async def send_error(self, exc: BaseException) -> None:
        """Send a typed error frame, keeping the socket open."""
        log_unexpected("websocket", exc)
        await self.send_json(self._error_frame(exc))

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Admit and dispatch ``resume``, ``send`` and ``cancel`` messages.

        Each message is first admitted as the HTTP request it stands for (a resume as a
        ``GET``, anything else as a ``POST``: :func:`~helix_django.transport.auth.authenticate_socket`),
        so the host's permissions see its method and its throttles count it.
        """
        try:
            if not isinstance(content, dict):
                raise ValidationError(gettext_lazy("A message must be a JSON object"), cause="message")
            kind = content.get("type")
            await sync_to_async(authenticate_socket)(self.scope, method="GET" if kind == "resume" else "POST")
            if kind == "resume":
                await self.start_reader(parse_cursor(content.get("from_sequence")) or 0)
            elif kind == "send":
                await self.handle_send(content)
            elif kind == "cancel":
                await self.handle_cancel(content)
            else:
                raise ValidationError(gettext_lazy("Unknown message type"), cause="message_type")
        except Exception as exc:  # every failure answers a typed frame (an untyped one without its text)
            await self.send_error(exc)

    async def handle_send(self, content: dict[str, Any]) -> None:
        """Execute a send and stream its run."""
        body = {k: content[k] for k in ("messages", "message", "trigger", "messageId") if k in content}
        messages, trigger, message_id, _ = await run_off_loop(validate_body, body)
        key = content.get("request_key")
        strategy = parse_multitask(content.get("multitask"))
        # Once begun, a send's start finishes even if this consumer is cancelled (its run is opened).
        handle = await completes_despite_cancel(
            get_executor().execute(
                session=self._session(),
                messages=messages,
                request_key=validate_request_key(key) if key else None,
                trigger=trigger,
                message_id=message_id,
                user=self._identity().user,
                multitask=strategy,
            )
        )
        if isinstance(handle, QueuedSend):  # the live run's frames go on; the message starts at its end
            await self.send_json(queued_frame(handle))
            return
        await self.send_json(run_frame(handle))
        await self.start_reader(handle.from_sequence)

    async def handle_cancel(self, content: dict[str, Any]) -> None:
        """Cancel the given (or current) run of the session."""
        # Read again (the current run moves on); a session deleted meanwhile is 404, not a 500.
        session = await sync_to_async(get_owned_session)(self._session().pk, self._identity().owner)
        run_id = content.get("run_id") or session.current_run_id
        if not isinstance(run_id, str) or not run_id:
            raise ValidationError(gettext_lazy("No run to cancel"), cause="run_id")
        run = await get_executor().cancel(session=session, run_id=run_id)
        await self.send_json(cancelled_frame(run))

    async def start_reader(self, from_sequence: int) -> None:
        """(Re)start streaming the session stream after ``from_sequence`` (or what the socket already sent).

        The running reader is stopped and awaited first, so two readers never send at once.
        """
        await self._stop_reader()
        self.reader_task = asyncio.ensure_future(self._stream(max(from_sequence, self.delivered_sequence)))

    async def _stop_reader(self) -> None:
        task, self.reader_task = self.reader_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _stream(self, from_sequence: int) -> None:
        manager = get_stream_manager()
        try:
            stream_id = self._session().stream_id
            info = await manager.get_info(stream_id)
            if info is None or is_purged(info):
                # 503 stream_opening (its claim is in flight), 409 stream_expired, or 404 stream_not_found
                await self.send_json(self._error_frame(await missing_stream_error(self._session().pk)))
                return
            check_cursor(from_sequence, info)
            reader = ResumableReader(manager, stream_id, from_sequence=from_sequence, wait_for_live=False, info=info)
            async for frame in stream_frames(reader, route="websocket"):
                if frame is None:  # only with marks_waits, which this reader does not ask for
                    continue
                sequence = frame.get("sequence")
                if sequence is not None:
                    if sequence <= self.delivered_sequence:
                        continue
                    self.delivered_sequence = sequence  # before the await: a replacing reader sees it
                await self.send_json(frame)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.send_error(exc)

    async def disconnect(self, code: int) -> None:
        """Stop this socket's reader (the run goes on)."""
        await self._stop_reader()


class UnknownPathConsumer(AsyncJsonWebsocketConsumer):
    """Every other WebSocket path: the typed refusal of a connect (404 ``not_found`` frame, close 4404).

    Without it Channels' router raises ``No route found`` and the server answers the
    handshake with a 500 (``ws/<prefix>sessions/<id>`` without its trailing slash).
    """

    async def connect(self) -> None:
        """Accept, send the ``not_found`` error frame and close with 4404."""
        await self.accept()
        error = RouteNotFoundError()
        await self.send_json(error_frame(error))
        await self.close(code=4000 + error.status)
