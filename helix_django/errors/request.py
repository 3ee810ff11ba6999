"""Refusals of the request itself: malformed or too large (4xx validation) and not allowed (401/403 auth)."""

from __future__ import annotations

from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from helix_django.errors.base import HelixError


class ValidationError(HelixError):
    """The request is malformed: body, header, cursor or id (400)."""

    code = "validation_error"
    http_status = 400
    category = "validation"
    default_message = _("Invalid request")


class PayloadTooLargeError(ValidationError):
    """The request body exceeds ``MAX_REQUEST_BYTES`` (002: 413, ``cause: request_body``)."""

    code = "validation_payload_too_large"
    http_status = 413
    default_message = _("Request body too large")


class MessageTooLargeError(PayloadTooLargeError):
    """A message to store exceeds ``MAX_MESSAGE_BYTES`` as UTF-8 JSON (docs/limits.md).

    413, not retryable, ``limitBytes``, ``sizeBytes``; ``cause: "message"`` for a sent
    message (``field``: where it is in the body when known), ``"tool_result"`` for client
    tool results that would grow the assistant message past the limit. Nothing is written.
    """

    code = "validation_message_too_large"
    default_message = _("Message too large")


class MethodNotAllowedError(ValidationError):
    """The endpoint does not serve this HTTP method (405).

    ``allowed``: the methods it serves, sent as the response's ``Allow`` header (RFC 9110
    §15.5.6: a 405 must carry one) by :func:`helix_django.transport.responses.send_error`.
    """

    code = "validation_method_not_allowed"
    http_status = 405
    default_message = _("Method not allowed")

    def __init__(self, message: str | Promise | None = None, *, allowed: tuple[str, ...] = (), **extra: Any) -> None:
        super().__init__(message, **extra)
        self.allowed = allowed


class UnsupportedMediaTypeError(ValidationError):
    """The request body's media type is not JSON (415)."""

    code = "validation_unsupported_media_type"
    http_status = 415
    default_message = _("Unsupported media type")


class NotAcceptableError(ValidationError):
    """No acceptable response format (406)."""

    code = "validation_not_acceptable"
    http_status = 406
    default_message = _("Not acceptable")


class InvalidToolResultError(ValidationError):
    """A submitted client-tool result or approval is invalid (002: 400 ``INVALID_RESULT``)."""

    default_message = _("Invalid tool result")

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("cause", "invalid_result")
        super().__init__(message, **kwargs)


class NotAuthenticatedError(HelixError):
    """No credentials, and anonymous chat is off (401)."""

    code = "auth_not_authenticated"
    http_status = 401
    category = "auth"
    default_message = _("Authentication credentials were not provided")


class AuthenticationFailedError(HelixError):
    """Credentials were given but are invalid (401)."""

    code = "auth_failed"
    http_status = 401
    category = "auth"
    default_message = _("Invalid credentials")


class PermissionDeniedError(HelixError):
    """The request is not allowed (403), e.g. a failed CSRF check."""

    code = "auth_permission_denied"
    http_status = 403
    category = "auth"
    default_message = _("Permission denied")
