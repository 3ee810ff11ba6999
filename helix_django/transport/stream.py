"""The raw stream route for clients that do not speak the AI SDK (002, "createResumableStreamHandler frames").

``GET <prefix>sessions/<session_id>/stream`` with the cursor in ``Last-Event-ID``
(or ``X-Resume-From-Sequence``, or ``?resumeFromSequence=``) streams the session stream's
chunks after it as SSE frames ``{type: "chunk", sequence, chunk}`` with ``id: <sequence>``,
then one terminal frame (``event: end`` / ``event: fail``, see
:mod:`helix_django.transport.frames`). An unknown stream, and any session the caller
does not own, is 404 ``{error: 'Stream not found'}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest

from helix_django.api.ownership import get_owned_session
from helix_django.conf import helix_settings
from helix_django.errors import HelixError, MethodNotAllowedError, StreamNotFoundError
from helix_django.ids import validate_session_id
from helix_django.orm import sync_to_async
from helix_django.streams import get_stream_manager
from helix_django.streams.base import ResumableReader
from helix_django.transport.auth import Identity, authenticate
from helix_django.transport.frames import check_cursor, stream_frames
from helix_django.transport.host import send_host_response, through_host
from helix_django.transport.http import ClientDisconnected, StreamedResponse, read_body, request_cursor
from helix_django.transport.sse import RAW_STREAM_HEADERS, frame, log_unexpected, send_error


async def _sse(reader: ResumableReader) -> AsyncIterator[bytes]:
    async for item in stream_frames(reader):
        if item["type"] == "chunk":
            yield frame(item, sequence=item["sequence"])
        else:
            yield frame(item, event=item["type"])


def _admit(django_request: HttpRequest) -> Identity:
    """The route's synchronous part, run inside the host's middleware: method, then authentication."""
    if django_request.method != "GET":
        raise MethodNotAllowedError()
    return authenticate(django_request)


class StreamConsumer:
    """ASGI app of the raw stream route (HTTP GET only)."""

    @classmethod
    def as_asgi(cls) -> StreamConsumer:
        """Return an ASGI application instance (Channels' naming)."""
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one request; see the module docstring."""
        headers: list[tuple[bytes, bytes]] = []
        try:
            body = await read_body(scope, receive, max_bytes=helix_settings.MAX_REQUEST_BYTES)
            answer = await sync_to_async(through_host)(scope, body, _admit)
            if answer.response is not None:
                await send_host_response(send, answer.response)
                return
            headers = answer.headers
            identity = answer.unwrap()
            headers = headers + identity.set_cookies
            session_id = validate_session_id(scope["url_route"]["kwargs"]["session_id"])
            from_sequence = request_cursor(scope) or 0
            try:
                session = await sync_to_async(get_owned_session)(session_id, identity.owner)
            except HelixError as exc:
                raise StreamNotFoundError() from exc
            manager = get_stream_manager()
            info = await manager.get_info(session.stream_id)
            if info is None:
                raise StreamNotFoundError()
            check_cursor(from_sequence, info)
        except ClientDisconnected:
            return
        except Exception as exc:
            log_unexpected("stream route", exc)
            await send_error(send, exc, headers=headers)
            return
        reader = ResumableReader(
            manager, session.stream_id, from_sequence=from_sequence, wait_for_live=False, info=info
        )
        response = StreamedResponse(send, receive, heartbeat_seconds=helix_settings.HEARTBEAT_SECONDS)
        await response.run(200, RAW_STREAM_HEADERS + headers, _sse(reader))
