"""Run the host site's Django request machinery in front of the chat and stream routes.

The chat and stream routes are raw ASGI apps (they stream, watch the disconnect and send
heartbeats themselves), so Django's handler never runs for them. :func:`through_host`
gives them what a Django view gets, in the one trip to the ORM's thread the route makes
anyway:

1. the ``Host`` header is validated against ``ALLOWED_HOSTS`` (``request.get_host()``),
   a disallowed host is a typed 400 (``validation_error``, ``cause: host``);
2. the host's ``MIDDLEWARE`` runs around the route's synchronous part (its "view":
   authentication, permissions, throttles, the session read), exactly as Django's
   ``BaseHandler`` runs it: ``process_request``/``__call__``, ``process_view`` (the view is
   ``csrf_exempt`` and ``login_not_required`` like every DRF view: DRF's
   ``SessionAuthentication`` enforces CSRF for cookie identities, the route answers an
   anonymous caller with its typed 401), ``process_exception`` and ``process_response``;
3. when a middleware answers by itself (a CORS preflight, a redirect, its own 403), that
   response is the route's answer, sent as it is; otherwise the headers the middleware added
   to the view's placeholder response (``Access-Control-*``, ``Vary``, security headers,
   ``Set-Cookie``) go onto the route's own response, streamed or refused.

The middleware sees a placeholder ``200`` with an empty body, not the stream: middleware
that rewrites bodies (GZip, ETags) leaves a streamed SSE response alone, as it must. The
placeholder is never cacheable, so a host's cache middleware stores nothing of a route and
serves none of it back; the route's answers carry their own one ``Cache-Control``
(:data:`helix_django.transport.wire_ui.NEVER_CACHE`), never the middleware's.

A refusal the route makes before its view can run (a body over ``MAX_REQUEST_BYTES``, a
malformed ``Content-Length``) goes through the host's middleware too, as the view's result
(:func:`send_refusal`): it carries the middleware's headers (CORS, so a browser app on
another origin can read the typed error) and is rendered in the request's language. Only a
``Host`` that ``ALLOWED_HOSTS`` refuses is answered before any middleware, as Django does.
"""

from __future__ import annotations

import dataclasses
import functools
import io
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.base import BaseHandler
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.utils import translation
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt

from helix_django.errors import ValidationError
from helix_django.orm import sync_to_async
from helix_django.transport.responses import send_error

#: Headers of the placeholder never copied to the route's response: those describing its (empty)
#: body, and its freshness (the route's answers carry their own one ``Cache-Control``).
_ROUTE_OWN_HEADERS = frozenset(
    {"content-type", "content-length", "content-encoding", "etag", "last-modified", "cache-control", "expires"}
)


class _Placeholder(HttpResponse):
    """The response the route's view returns inside the host's middleware (see the module docstring).

    It is never cacheable (Django's ``never_cache`` headers): a host's ``UpdateCacheMiddleware``
    stores nothing, so its ``FetchFromCacheMiddleware`` never answers a later request of the
    route with it.
    """

    def __init__(self) -> None:
        super().__init__()
        add_never_cache_headers(self)


@dataclasses.dataclass
class HostAnswer:
    """What the host's middleware made of one request of a helix route."""

    response: HttpResponseBase | None = None
    """The host's own answer (a middleware short-circuited the route): send it as it is."""
    headers: list[tuple[bytes, bytes]] = dataclasses.field(default_factory=list)
    """Headers the middleware added, for the route's own response (``Set-Cookie`` included)."""
    value: Any = None
    """What the route's view returned."""
    error: BaseException | None = None
    """What the route's view raised (re-raised by :meth:`unwrap`)."""
    language: str | None = None
    """The language active in the route's view (the host's ``LocaleMiddleware`` picks the request's):
    the route renders its refusals in it (:func:`helix_django.transport.responses.send_error`)."""

    def unwrap(self) -> Any:
        """Return the view's value, or raise the exception it raised."""
        if self.error is not None:
            raise self.error
        return self.value


class _HostHandler(BaseHandler):
    """The host's middleware chain around a helix route's view (synchronous mode)."""

    _view_middleware: list[Any]
    """Set by ``BaseHandler.load_middleware`` (not in Django's stubs)."""

    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)

    def _get_response(self, request: HttpRequest) -> HttpResponseBase:
        view = request._helix_view  # type: ignore[attr-defined]
        for process_view in self._view_middleware:
            response = process_view(request, view, (), {})
            if response is not None:
                return response
        return view(request)


_handler: _HostHandler | None = None


def _get_handler() -> _HostHandler:
    global _handler  # noqa: PLW0603 - one chain per process, rebuilt when MIDDLEWARE changes
    if _handler is None:
        _handler = _HostHandler()
    return _handler


def _reset_handler(*, setting: str, **kwargs: Any) -> None:
    global _handler  # noqa: PLW0603
    if setting == "MIDDLEWARE":
        _handler = None


setting_changed.connect(_reset_handler)


def build_request(scope: dict[str, Any], body: bytes) -> HttpRequest:
    """Return the Django request of an ASGI HTTP ``scope`` whose whole ``body`` was read.

    The body is preset (``request.body`` returns it): the route read and bounded it by
    ``MAX_REQUEST_BYTES`` already, so a host middleware reading ``request.body`` (logging,
    signature checks) gets these bytes, never Django's ``RequestDataTooBig`` for a body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``. Django's guard stays as it is for every other view.
    """
    request = ASGIRequest(scope, io.BytesIO(body))
    request._body = body  # what HttpRequest.body caches once it has read the stream
    return request


def through_host(scope: dict[str, Any], body: bytes, view: Callable[[HttpRequest], Any]) -> HostAnswer:
    """Run ``view(request)`` inside the host's middleware; synchronous (call it in the ORM's thread).

    Raises ValidationError (400, ``cause: host``) for a ``Host`` header ``ALLOWED_HOSTS``
    refuses, before any middleware runs. Exceptions of ``view`` are returned in
    :attr:`HostAnswer.error`, never rendered by Django.
    """
    request = build_request(scope, body)
    try:
        request.get_host()
    except DisallowedHost as exc:
        raise ValidationError(gettext_lazy("Invalid Host header"), cause="host") from exc
    answer = HostAnswer()

    @csrf_exempt
    @login_not_required  # the route authenticates and refuses a typed 401 itself, as DRF's views do
    def helix_view(inner: HttpRequest) -> HttpResponse:
        answer.language = translation.get_language()
        try:
            answer.value = view(inner)
        except Exception as exc:  # rendered by the route, typed, with the middleware's headers
            answer.error = exc
        return _Placeholder()

    request._helix_view = helix_view  # type: ignore[attr-defined]
    response = _get_handler().get_response(request)
    if not isinstance(response, _Placeholder):
        answer.response = response
        answer.error = answer.value = None
        return answer
    answer.headers = response_headers(response, skip=_ROUTE_OWN_HEADERS)
    return answer


LOCALE_MIDDLEWARE = "django.middleware.locale.LocaleMiddleware"


def handshake_language(scope: dict[str, Any]) -> str | None:
    """Return the language the host's ``LocaleMiddleware`` would pick for ``scope``, or None without it.

    For the WebSocket, which runs no host middleware: its frames are rendered in the
    handshake's language (cookie, ``Accept-Language``) exactly when the host's HTTP views are.
    """
    if LOCALE_MIDDLEWARE not in settings.MIDDLEWARE:
        return None
    return translation.get_language_from_request(build_request({**scope, "type": "http", "method": "GET"}, b""))


def _raise(exc: BaseException, request: HttpRequest) -> None:
    raise exc


def refusal_through_host(scope: dict[str, Any], exc: BaseException) -> HostAnswer:
    """Run the host's middleware around a view that raises ``exc``; synchronous (the ORM's thread).

    For a refusal made before the route's view (its body unread or refused): the view sees
    an empty body. Returns the :class:`HostAnswer` (``error`` is ``exc`` unless a middleware
    answered by itself); raises ValidationError (``cause: host``) as :func:`through_host` does.
    """
    return through_host(scope, b"", functools.partial(_raise, exc))


async def send_refusal(
    send: Any, scope: dict[str, Any], exc: BaseException, *, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send the typed refusal of ``exc``, made before the route's view, through the host's middleware.

    It gets the middleware's headers (plus ``headers``) and the request's language; a
    middleware that answers by itself is answered with; a disallowed ``Host`` is its own typed 400.
    """
    try:
        answer = await sync_to_async(refusal_through_host)(scope, exc)
    except ValidationError as bad_host:
        await send_error(send, bad_host)
        return
    if answer.response is not None:
        await send_host_response(send, answer.response)
        return
    await send_error(send, exc, headers=[*answer.headers, *(headers or [])], language=answer.language)


def response_headers(response: HttpResponseBase, *, skip: frozenset[str] = frozenset()) -> list[tuple[bytes, bytes]]:
    """Return the ASGI header list of a Django response (``Set-Cookie`` included), minus ``skip`` names."""
    headers = [
        (name.lower().encode("latin-1"), str(value).encode("latin-1"))
        for name, value in response.items()
        if name.lower() not in skip
    ]
    cookies = response.cookies.values()
    headers += [(b"set-cookie", morsel.output(header="").strip().encode("latin-1")) for morsel in cookies]
    return headers


async def send_host_response(send: Any, response: HttpResponseBase) -> None:
    """Send a Django response a host middleware returned (its body read whole)."""
    if response.streaming:
        body = b"".join(response.streaming_content)  # type: ignore[attr-defined, arg-type]
    else:
        body = response.content  # type: ignore[attr-defined]
    await send({"type": "http.response.start", "status": response.status_code, "headers": response_headers(response)})
    await send({"type": "http.response.body", "body": body})
