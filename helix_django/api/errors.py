"""Render every error of the DRF endpoints as the one flat typed body (STYLE, "Errors"; 002, "Wire errors").

:func:`helix_exception_handler` is installed by :class:`TypedRefusals` (every helix ``APIView``)
through ``get_exception_handler()``, so the host's ``REST_FRAMEWORK`` stays untouched.
A ``HelixError`` keeps its status and ``to_body()``; DRF's own exceptions map to typed
equivalents, Django's ``RequestDataTooBig`` to the 413 ``validation_payload_too_large`` of
every oversized body, its ``TooManyFieldsSent`` / ``TooManyFilesSent`` (a form body over
``DATA_UPLOAD_MAX_NUMBER_FIELDS`` / ``_FILES``) to a 400 ``validation_error``; anything
else is ``framework_internal_error`` (500) without its text.
Validation errors name the offending fields, never their values.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext_lazy
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.settings import api_settings

from helix_django.access import policy
from helix_django.api.wire import HelixJSONRenderer
from helix_django.errors import (
    AuthenticationFailedError,
    FrameworkInternalError,
    HelixError,
    MethodNotAllowedError,
    NotAcceptableError,
    NotAuthenticatedError,
    PermissionDeniedError,
    RateLimitedError,
    RouteNotFoundError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from helix_django.limits import request_too_large

logger = logging.getLogger(__name__)


#: The name ``fields`` gives a refusal of the body as a whole (DRF's default key, whatever the host's).
NON_FIELD_ERRORS = "non_field_errors"


def _fields(detail: Any) -> list[str]:
    """The top-level fields a DRF ``ValidationError`` names, the host's ``NON_FIELD_ERRORS_KEY`` as helix's own."""
    if isinstance(detail, dict):
        host_key = api_settings.NON_FIELD_ERRORS_KEY
        return sorted(NON_FIELD_ERRORS if key == host_key else str(key) for key in detail)[:20]
    return []


def to_helix_error(exc: BaseException, request: Any = None) -> HelixError:
    """Return the typed error for any exception raised by a DRF endpoint (``request``: the one it refused)."""
    if isinstance(exc, HelixError):
        return exc
    if isinstance(exc, RequestDataTooBig):  # Django's own guard, if something read the body before helix did
        return _data_too_big(request)
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):  # Django's guards, while DRF parses a form body
        return _too_many_parts(exc)
    if isinstance(exc, Http404 | exceptions.NotFound):  # a missing session is raised as SessionNotFoundError
        return RouteNotFoundError()
    if isinstance(exc, exceptions.NotAuthenticated):
        return NotAuthenticatedError()
    if isinstance(exc, exceptions.AuthenticationFailed):
        return AuthenticationFailedError()
    if isinstance(exc, exceptions.PermissionDenied | DjangoPermissionDenied):
        is_csrf = "CSRF" in str(getattr(exc, "detail", ""))
        return PermissionDeniedError(
            gettext_lazy("CSRF check failed") if is_csrf else None, cause="csrf" if is_csrf else None
        )
    if isinstance(exc, exceptions.Throttled):
        return RateLimitedError(retryAfterSeconds=math.ceil(exc.wait or 1))
    if isinstance(exc, exceptions.MethodNotAllowed):
        return MethodNotAllowedError()
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return UnsupportedMediaTypeError()
    if isinstance(exc, exceptions.NotAcceptable):
        return NotAcceptableError()
    if isinstance(exc, exceptions.ParseError):
        return ValidationError(gettext_lazy("Malformed JSON body"), cause="json")
    if isinstance(exc, exceptions.ValidationError):
        return ValidationError(gettext_lazy("Invalid request body"), cause="body", fields=_fields(exc.detail))
    if isinstance(exc, ImproperlyConfigured):  # the site's own text, never user data: say what to fix
        logger.error("API request failed: %s: %s", type(exc).__name__, exc)
    else:
        logger.error("API request failed: %s", type(exc).__name__)
    return FrameworkInternalError()


def _data_too_big(request: Any) -> HelixError:
    """Django's ``RequestDataTooBig``, as the typed 413 (``limitBytes``: ``DATA_UPLOAD_MAX_MEMORY_SIZE``)."""
    declared = getattr(request, "META", {}).get("CONTENT_LENGTH") or ""
    size = int(declared) if declared.isascii() and declared.isdigit() else None
    return request_too_large(size, limit_bytes=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def _too_many_parts(exc: TooManyFieldsSent | TooManyFilesSent) -> HelixError:
    """A form body over ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` / ``_FILES``: 400 ``validation_error``, ``cause: "body"``.

    ``limitFields`` (or ``limitFiles``) is the host's limit; the refusal of a body helix
    cannot take, as the chat route's.
    """
    if isinstance(exc, TooManyFilesSent):
        return ValidationError(
            gettext_lazy("Too many files"), cause="body", limitFiles=settings.DATA_UPLOAD_MAX_NUMBER_FILES
        )
    return ValidationError(
        gettext_lazy("Too many form fields"), cause="body", limitFields=settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    )


def helix_exception_handler(exc: BaseException, context: dict[str, Any]) -> Response:
    """DRF exception handler: the typed body and status of ``exc``.

    A retryable 503 gets ``Retry-After: 1``; a 429 the throttle's wait. Django's
    ``RequestDataTooBig`` is the typed 413 ``validation_payload_too_large``, never a 500.
    """
    error = to_helix_error(exc, context.get("request"))
    headers: dict[str, str] = {}
    if error.status == 503 and error.is_retryable:
        headers["Retry-After"] = "1"
    if error.status == 429:
        headers["Retry-After"] = str(error.extra.get("retryAfterSeconds") or 1)
    request = context.get("request")
    if error.status == 401 and request is not None:
        challenge = policy.authenticate_header(request)
        if challenge:
            headers["WWW-Authenticate"] = challenge
    return Response(error.to_body(), status=error.status, headers=headers)


class TypedRefusals:
    """Mixin of every helix ``APIView``: its refusals are the typed bodies of :func:`helix_exception_handler`.

    A ``?format=`` no renderer of the view has is 406 ``validation_not_acceptable``
    (``cause: "format"``): DRF raises ``Http404`` for it (the format is a URL suffix
    there), which read as a missing route or session. An ``Accept`` no renderer matches
    stays DRF's 406 (no ``cause``). The host's ``REST_FRAMEWORK`` is left alone.

    A refusal is rendered as JSON whatever renderer the request negotiated: a success may
    be the host's browsable API (``Accept: text/html``, ``?format=api``), a refusal is never
    its HTML page (nor the schema view's YAML). A refusal is never cacheable: it carries
    Django's ``never_cache`` headers (one ``Cache-Control`` with ``no-store``), the schema
    view's too, whose success a cache may keep.
    """

    def perform_content_negotiation(self, request: Any, force: bool = False) -> Any:  # noqa: FBT001, FBT002
        """Return DRF's ``(renderer, media type)``; raise NotAcceptableError (406) for an unserved ``?format=``."""
        try:
            return super().perform_content_negotiation(request, force=force)  # type: ignore[misc]
        except Http404:
            raise NotAcceptableError(gettext_lazy("Format not served"), cause="format") from None

    def handle_exception(self, exc: Exception) -> Any:
        """Return the typed refusal of ``exc`` (``HelixJSONRenderer``, ``never_cache`` headers)."""
        response = super().handle_exception(exc)  # type: ignore[misc]
        add_never_cache_headers(response)
        self.request.accepted_renderer, self.request.accepted_media_type = (  # type: ignore[attr-defined]
            HelixJSONRenderer(),
            "application/json",
        )
        return response

    def get_exception_handler(self) -> Any:
        """Return :func:`helix_exception_handler`."""
        return helix_exception_handler
