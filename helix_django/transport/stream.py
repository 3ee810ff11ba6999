"""The raw stream route for clients that do not speak the AI SDK (002, "createResumableStreamHandler frames").

``GET <prefix>sessions/<session_id>/stream`` with the cursor in ``Last-Event-ID``
(or ``X-Resume-From-Sequence``, or ``?resumeFromSequence=``) streams the session stream's
chunks after it as SSE frames ``{type: "chunk", sequence, chunk}`` with ``id: <sequence>``,
then one terminal frame (``event: end`` / ``event: fail``, see
:mod:`helix_django.transport.frames`). An unknown stream, and any session the caller
does not own, is 404 ``{error: 'Stream not found'}``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest

from helix_django.conf import helix_settings
from helix_django.errors import MethodNotAllowedError, StreamNotFoundError, ValidationError
from helix_django.ids import validate_session_id
from helix_django.models import ChatSession
from helix_django.orm import sync_to_async
from helix_django.store.reads import read_session
from helix_django.streams import get_stream_manager
from helix_django.streams.reader import ResumableReader
from helix_django.transport.auth import Identity, authenticate
from helix_django.transport.frames import check_cursor, is_purged, missing_stream_error, stream_frames
from helix_django.transport.host import refusal_through_host, send_host_response, through_host
from helix_django.transport.http import ClientDisconnected, StreamedResponse, read_body, request_cursor
from helix_django.transport.plan import BODY_BYTES
from helix_django.transport.responses import log_unexpected, send_error
from helix_django.transport.wire_raw import RAW_STREAM_HEADERS, sse_event


async def _sse(reader: ResumableReader) -> AsyncIterator[bytes]:
    """Yield the route's SSE body in parts: the frames ready together in one part (up to ``BODY_BYTES``).

    The first part is yielded before the reader first waits (empty when nothing is
    ready): the response sends it with its opening, so a resume's headers and its backlog
    take two sends, not one per chunk.
    """
    part: list[bytes] = []
    size = 0
    async for item in stream_frames(reader, marks_waits=True):
        if item is None:  # the reader may wait now: what is ready goes out first
            yield b"".join(part)
            part, size = [], 0
            continue
        encoded = sse_event(item)
        part.append(encoded)
        size += len(encoded)
        if size >= BODY_BYTES:
            yield b"".join(part)
            part, size = [], 0
    if part:
        yield b"".join(part)


def _admit(scope: dict[str, Any], django_request: HttpRequest) -> tuple[Identity, ChatSession, int]:
    """The route's synchronous part, run inside the host's middleware: method, authentication, then the
    session read (one hop). Returns ``(identity, session, cursor)``.

    Refusals in the route's order: 405, then 401/403/429, then 400 (session id, cursor),
    then 404 ``Stream not found`` for a session that is missing or another owner's.
    """
    if django_request.method != "GET":
        raise MethodNotAllowedError(allowed=("GET",))
    identity = authenticate(django_request)
    session_id = validate_session_id(scope["url_route"]["kwargs"]["session_id"])
    from_sequence = request_cursor(scope) or 0
    session = read_session(session_id)
    if session is None or not identity.owner.owns(session):
        raise StreamNotFoundError()
    return identity, session, from_sequence


class StreamConsumer:
    """ASGI app of the raw stream route (HTTP GET only)."""

    @classmethod
    def as_asgi(cls) -> StreamConsumer:
        """Return an ASGI application instance (Channels' naming)."""
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one request; see the module docstring."""
        opened = await self._open(scope, receive, send)
        del scope  # the router's copy: an open response keeps no scope
        if opened is None:
            return
        reader, headers = opened  # an open response holds no request, DRF object or user
        del opened
        response = StreamedResponse(send, receive, heartbeat_seconds=helix_settings.HEARTBEAT_SECONDS)
        await response.run(200, RAW_STREAM_HEADERS + headers, _sse(reader), first_part_ready=True)

    async def _open(
        self, scope: dict[str, Any], receive: Any, send: Any
    ) -> tuple[ResumableReader, list[tuple[bytes, bytes]]] | None:
        """Admit the request and read the stream after its cursor; return ``(reader, headers)`` or None once answered.

        One read of the stream gives its info (404 when it does not exist, 409 for a cursor
        beyond its head) and the first chunks; the reader starts on the waiter subscribed
        before it, so it reads again only after a write.
        """
        headers: list[tuple[bytes, bytes]] = []
        language: str | None = None
        waiter = None
        try:
            try:
                body = await read_body(scope, receive, max_bytes=helix_settings.MAX_REQUEST_BYTES)
            except ValidationError as exc:  # refused unread: still the view's result in the host's middleware
                answer = await sync_to_async(refusal_through_host)(scope, exc)
            else:
                answer = await sync_to_async(through_host)(scope, body, functools.partial(_admit, scope))
            if answer.response is not None:
                await send_host_response(send, answer.response)
                return None
            headers, language = answer.headers, answer.language
            identity, session, from_sequence = answer.unwrap()
            headers = headers + identity.set_cookies
            manager = get_stream_manager()
            waiter = manager.subscribe(session.stream_id)
            chunks, info = await manager.read_after(session.stream_id, from_sequence)
            if info is None or is_purged(info):
                raise await missing_stream_error(session.pk)
            check_cursor(from_sequence, info)
        except ClientDisconnected:
            return None
        except Exception as exc:
            if waiter is not None:
                waiter.cancel()
            log_unexpected("stream route", exc)
            await send_error(send, exc, headers=headers, language=language)
            return None
        reader = ResumableReader(
            manager,
            session.stream_id,
            from_sequence=from_sequence,
            wait_for_live=False,
            info=info,
            subscribed=waiter,
            chunks=chunks,
        )
        return reader, headers
