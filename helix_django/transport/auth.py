"""Authenticate a raw ASGI HTTP request with DRF's classes (issue 4, "Ownership and security").

The chat and stream routes are Channels ASGI apps, not Django views, so the Django
middleware never runs for them. :func:`aauthenticate` builds an ``ASGIRequest`` from the
scope and body, loads its Django session and user as the middleware would, and runs
DRF's Session and Token authentication: CSRF is enforced for session auth on unsafe
methods (and for anonymous visitors identified by their session cookie). DRF throttles
configured by the host (``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``) apply under the
scope ``helix_chat``.
"""

from __future__ import annotations

import dataclasses
import io
import math
from http.cookies import SimpleCookie
from typing import Any

from django.contrib.auth import get_user
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse
from django.utils.functional import SimpleLazyObject
from rest_framework import exceptions
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.settings import api_settings

from helix_django.api.ownership import Owner, authenticators, enforce_anonymous_csrf, owner_for
from helix_django.errors import (
    AuthenticationFailedError,
    NotAuthenticatedError,
    PermissionDeniedError,
    RateLimitedError,
)
from helix_django.orm import sync_to_async


@dataclasses.dataclass
class Identity:
    """The authenticated caller of a raw ASGI request."""

    owner: Owner
    user: Any
    """The Django user (None for an anonymous owner)."""
    set_cookies: list[tuple[bytes, bytes]]
    """``Set-Cookie`` headers to send (a new anonymous Django session)."""


class _ThrottleScope:
    throttle_scope = "helix_chat"


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


def authenticate(scope: dict[str, Any], body: bytes = b"", *, create_anonymous: bool = False) -> Identity:
    """Synchronous :func:`aauthenticate` (for callers already in the ORM's thread)."""
    request = ASGIRequest(scope, io.BytesIO(body))
    middleware = SessionMiddleware(_no_response)
    middleware.process_request(request)
    # A lazy user, as AuthenticationMiddleware sets it; the stubs type request.user as the user itself.
    request.user = SimpleLazyObject(lambda: get_user(request))  # type: ignore[assignment]
    drf_request = Request(request, parsers=[_UnparsedBody()], authenticators=authenticators())
    try:
        user = drf_request.user
        if not user.is_authenticated:
            enforce_anonymous_csrf(request)
        for throttle_class in api_settings.DEFAULT_THROTTLE_CLASSES:
            throttle = throttle_class()
            if not throttle.allow_request(drf_request, _ThrottleScope()):
                raise RateLimitedError(retryAfterSeconds=math.ceil(throttle.wait() or 1))
    except exceptions.NotAuthenticated as exc:
        raise NotAuthenticatedError() from exc
    except exceptions.AuthenticationFailed as exc:
        raise AuthenticationFailedError() from exc
    except exceptions.PermissionDenied as exc:
        raise PermissionDeniedError("CSRF check failed", cause="csrf") from exc
    owner = owner_for(user, request.session, create_anonymous=create_anonymous)
    cookies: list[tuple[bytes, bytes]] = []
    if request.session.modified:
        response = middleware.process_response(request, HttpResponse())
        cookies = _cookie_headers(response.cookies)
    return Identity(owner=owner, user=user if user.is_authenticated else None, set_cookies=cookies)


def _cookie_headers(cookies: SimpleCookie) -> list[tuple[bytes, bytes]]:
    return [(b"set-cookie", morsel.OutputString().encode("latin-1")) for morsel in cookies.values()]


async def aauthenticate(scope: dict[str, Any], body: bytes = b"", *, create_anonymous: bool = False) -> Identity:
    """Authenticate the request of ``scope`` (+ ``body``) and return its Identity.

    Raises NotAuthenticatedError / AuthenticationFailedError (401), PermissionDeniedError
    (403, ``cause: csrf``) or RateLimitedError (429). ``create_anonymous`` starts a Django
    session for a new anonymous visitor when anonymous chat is allowed.
    """
    return await sync_to_async(authenticate)(scope, body, create_anonymous=create_anonymous)


__all__ = ["Identity", "NotAuthenticatedError", "aauthenticate", "authenticate"]
