"""Authenticate a helix route's Django request with the DRF policy of helix.

The chat and stream routes are Channels ASGI apps; :func:`helix_django.transport.host.through_host`
runs the host's middleware around them and hands :func:`authenticate` the resulting
``HttpRequest``. Where the host's middleware gave it no Django session or user
(``SessionMiddleware`` / ``AuthenticationMiddleware`` absent), they are loaded here as the
middleware would. Then the classes of :mod:`helix_django.access.policy` apply: the
authenticators (CSRF enforced by ``SessionAuthentication`` on unsafe methods, and for
anonymous visitors identified by their session cookie), the permissions and the throttles
(scope ``helix_chat``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from http.cookies import SimpleCookie
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject
from django.utils.translation import gettext_lazy
from rest_framework import exceptions
from rest_framework.parsers import BaseParser
from rest_framework.request import Request

from helix_django.access import policy
from helix_django.access.ownership import Owner, enforce_anonymous_csrf, is_signed_in, owner_for
from helix_django.errors import (
    AuthenticationFailedError,
    HelixError,
    NotAuthenticatedError,
    PermissionDeniedError,
    RateLimitedError,
)
from helix_django.models import ChatSession
from helix_django.transport.host import build_request


@dataclasses.dataclass
class Identity:
    """The authenticated caller of a raw ASGI request."""

    owner: Owner
    user: Any
    """The Django user (None for an anonymous owner)."""
    set_cookies: list[tuple[bytes, bytes]]
    """``Set-Cookie`` headers to send (a new anonymous Django session)."""


class _RouteView:
    """The ``view`` DRF permissions and throttles are handed for the chat and stream routes.

    ``queryset`` names ``ChatSession`` (empty) for a permission class that reads the view's
    model (``DjangoModelPermissions``: a send needs ``helix_django.add_chatsession``).
    """

    throttle_scope = policy.CHAT_SCOPE
    queryset = ChatSession.objects.none()


class _UnparsedBody(BaseParser):
    """Let Django's CSRF check read ``request.POST`` of a JSON body without parsing it.

    The chat route reads and validates its body itself (``parse_chat_request``); DRF only
    authenticates here. Without a parser, session-authenticated POSTs with a JSON body failed
    with ``UnsupportedMediaType`` (a 500) as soon as the CSRF check touched ``request.POST``.
    """

    media_type = "*/*"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> dict[str, Any]:
        return {}


def _no_response(request: Any) -> HttpResponse:
    """The ``get_response`` SessionMiddleware requires; never called (only ``process_request`` is used)."""
    return HttpResponse()


def authenticate(request: HttpRequest, *, create_anonymous: bool = False) -> Identity:
    """Authenticate ``request`` with helix's DRF policy and return its Identity (in the ORM's thread).

    Raises NotAuthenticatedError / AuthenticationFailedError (401), PermissionDeniedError
    (403; ``cause: csrf`` for a failed CSRF check) or RateLimitedError (429).
    ``create_anonymous`` starts a Django session for a new anonymous visitor when anonymous
    chat is allowed.
    """
    own_session = not hasattr(request, "session")
    middleware = SessionMiddleware(_no_response)
    if own_session:
        middleware.process_request(request)
    if not hasattr(request, "user"):
        # A lazy user, as AuthenticationMiddleware sets it; the stubs type request.user as the user itself.
        request.user = SimpleLazyObject(lambda: get_user(request))  # type: ignore[assignment]
    drf_request = Request(request, parsers=[_UnparsedBody()], authenticators=policy.authenticators())
    view = _RouteView()
    try:
        user = drf_request.user
        if not is_signed_in(user):
            enforce_anonymous_csrf(request)
        _check_permissions(drf_request, view, user)
        _check_throttles(drf_request, view)
    except exceptions.NotAuthenticated as exc:
        raise _challenged(NotAuthenticatedError(), drf_request) from exc
    except exceptions.AuthenticationFailed as exc:
        raise _challenged(AuthenticationFailedError(), drf_request) from exc
    except exceptions.PermissionDenied as exc:
        raise PermissionDeniedError(gettext_lazy("CSRF check failed"), cause="csrf") from exc
    owner = owner_for(user, request.session, create_anonymous=create_anonymous)
    cookies: list[tuple[bytes, bytes]] = []
    if own_session and request.session.modified:
        response = middleware.process_response(request, HttpResponse())
        cookies = _cookie_headers(response.cookies)
    return Identity(owner=owner, user=user if is_signed_in(user) else None, set_cookies=cookies)


def _check_permissions(drf_request: Request, view: Any, user: Any) -> None:
    """Raise NotAuthenticatedError (401, an anonymous caller) or PermissionDeniedError where a permission refuses."""
    for permission in policy.permissions():
        if not permission.has_permission(drf_request, view):
            if not is_signed_in(user):
                raise _challenged(NotAuthenticatedError(), drf_request)
            raise PermissionDeniedError()


def _check_throttles(drf_request: Request, view: Any) -> None:
    """Raise RateLimitedError (429, ``retryAfterSeconds`` the throttle's wait) where a throttle refuses."""
    for throttle in policy.throttles():
        if not throttle.allow_request(drf_request, view):
            raise RateLimitedError(retryAfterSeconds=math.ceil(throttle.wait() or 1))


def _challenged(error: HelixError, request: Any) -> HelixError:
    """Return the 401 ``error`` with the ``WWW-Authenticate`` challenge of helix's first authentication class."""
    error.www_authenticate = policy.authenticate_header(request)
    return error


def authenticate_socket(scope: dict[str, Any], *, method: str = "GET") -> Identity:
    """Authenticate a WebSocket handshake or one of its messages with helix's policy (in the ORM's thread).

    The handshake is checked as a ``GET`` of the chat route, each client message as the
    HTTP request it stands for (``method``: ``GET`` for a resume, ``POST`` for a send or a
    cancel): the same authentication, permission and throttle classes
    (:func:`authenticate`), so every message counts as one request against the throttles.
    Where the host requires https (``SECURE_SSL_REDIRECT``, not exempted by
    ``SECURE_REDIRECT_EXEMPT``), a handshake that is not secure (``ws://``, unless
    ``SECURE_PROXY_SSL_HEADER`` says the host's proxy terminated TLS) is refused. CSRF is not
    checked: the socket's ``Origin`` was (:mod:`helix_django.transport.routing`). A
    ``scope["session"]`` / ``scope["user"]`` that a host's own ``AuthMiddlewareStack`` set are
    the request's, as Django's session and authentication middleware set them for a view.

    Raises DisallowedHost for a ``Host`` that ``ALLOWED_HOSTS`` refuses, PermissionDeniedError
    (403, ``cause: https``) for an insecure handshake, and what :func:`authenticate` raises.
    """
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    request = build_request({**scope, "type": "http", "method": method, "scheme": scheme}, b"")
    request.get_host()
    # What a host's Channels AuthMiddlewareStack found, as Django's middleware gives an HTTP view.
    if "session" in scope:
        request.session = scope["session"]
    if "user" in scope:
        request.user = scope["user"]
    if _requires_https(request) and not request.is_secure():
        raise PermissionDeniedError(gettext_lazy("A secure connection is required"), cause="https")
    request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
    return authenticate(request)


def _requires_https(request: HttpRequest) -> bool:
    """Whether the host redirects this path to https (Django's ``SecurityMiddleware`` rule)."""
    if not settings.SECURE_SSL_REDIRECT:
        return False
    path = request.path.lstrip("/")
    return not any(re.search(pattern, path) for pattern in settings.SECURE_REDIRECT_EXEMPT)


def _cookie_headers(cookies: SimpleCookie) -> list[tuple[bytes, bytes]]:
    return [(b"set-cookie", morsel.OutputString().encode("latin-1")) for morsel in cookies.values()]


__all__ = ["Identity", "NotAuthenticatedError", "authenticate", "authenticate_socket"]
