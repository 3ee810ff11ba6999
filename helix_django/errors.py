"""The HelixError tree: every refusal helix_django makes, as a typed error.

Each subclass sets class attributes only (``code``, ``http_status``, ``retryable``,
``category``, ``default_message``). All transports render one flat body, the reference's
(002, "Wire errors")::

    {"error": "<message>", "code": "<code>", "retryable": bool, "cause": "<reason>"?, ...extra}

``extra`` holds the additional fields a row of the wire-error table names (``runId``,
``limitBytes``, ``sizeBytes``, ...). The message is fixed per class or given by our own
code; it never echoes free text from a cause (an exception's text, a prompt, a tool
argument). Released ``code`` strings never change.

Messages are for people, so they are translated (gettext_lazy, resolved in the language
active when the error is rendered, :attr:`HelixError.message` and :meth:`HelixError.to_body`:
the routes render every refusal in the request's language, even one made before that
language was known, such as a malformed body); codes stay English identifiers. The
``errorDetail`` kept on a run (:meth:`HelixError.to_detail`) keeps the English text: it is
stored once and read by whoever opens the run later. ``stream_failed``'s message is the
reference's wire marker and stays as it is.

This module imports nothing from DRF or Channels.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import override


class HelixError(Exception):
    """Base of every typed helix_django error.

    ``cause`` is a short machine-readable reason (``snapshot_unstable``), never free text.
    ``extra`` fields are merged into the wire body.
    """

    code: ClassVar[str] = "helix_error"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False
    category: ClassVar[str] = "internal"
    default_message: ClassVar[str | Promise] = _("Internal error")
    www_authenticate: str | None = None
    """A 401's ``WWW-Authenticate`` challenge (a response header, never in the body)."""

    def __init__(self, message: str | Promise | None = None, *, cause: str | None = None, **extra: Any) -> None:
        self._text = message or self.default_message
        self.cause = cause
        self.extra = extra
        super().__init__(str(self._text))

    @property
    def message(self) -> str:
        """The message for people, in the language active now (a lazy message is translated here)."""
        return str(self._text)

    @property
    def is_retryable(self) -> bool:
        """Whether a client may retry the same request (class default unless overridden)."""
        return self.retryable

    @property
    def status(self) -> int:
        """HTTP status of this error (002, ``httpStatusForHelixError``)."""
        return self.http_status

    def to_body(self) -> dict[str, Any]:
        """Return the flat wire body ``{error, code, retryable, cause?, **extra}``."""
        body: dict[str, Any] = {"error": self.message, "code": self.code, "retryable": self.is_retryable}
        if self.cause:
            body["cause"] = self.cause
        body.update(self.extra)
        return body

    def to_detail(self) -> dict[str, Any]:
        """Return the scrubbed ``errorDetail`` kept on a failed run: code, category, retryable."""
        with override(None):  # gettext with no language: the English msgid
            message = str(self._text)
        return {"code": self.code, "category": self.category, "retryable": self.is_retryable, "message": message}


# --- state -----------------------------------------------------------------------------


class StateError(HelixError):
    """A request conflicts with the session's state (409 unless retryable)."""

    code = "state_error"
    http_status = 409
    category = "state"


class SessionNotFoundError(StateError):
    """The session does not exist or belongs to another owner (002: 404)."""

    code = "state_session_not_found"
    http_status = 404
    default_message = _("Session not found")


#: HistoryIncompleteError causes no retry fixes.
NOT_RETRYABLE_HISTORY_CAUSES = frozenset({"corrupt_row", "store_rejected"})


class HistoryIncompleteError(StateError):
    """A snapshot or history read could not return a consistent view (002, "Consistent reads").

    Causes: ``snapshot_unstable``, ``store_error``, ``short_read`` (retryable, 503),
    ``corrupt_row`` and ``store_rejected`` (not retryable, 409; the database refused a write
    no retry can fix: an integrity or data error, see :func:`store_error_for`).
    """

    code = "state_history_incomplete"
    http_status = 503
    retryable = True
    default_message = _("Conversation history is temporarily unavailable")

    @property
    def is_retryable(self) -> bool:
        return self.cause not in NOT_RETRYABLE_HISTORY_CAUSES

    @property
    def status(self) -> int:
        return 503 if self.is_retryable else 409


class AlreadyRunningError(StateError):
    """A send arrived while a run of the session is live (002, "Sends and conflicts")."""

    code = "state_already_running"
    retryable = True
    default_message = _("A run is already active on this session")


class SessionFullError(StateError):
    """A send would add messages to a session holding ``MAX_SESSION_MESSAGES`` (docs/limits.md).

    409, never retryable (the session stays full): ``cause: "session_messages"``,
    ``limitMessages``, ``messageCount``. Nothing is written.
    """

    code = "state_session_full"
    default_message = _("The session holds the most messages allowed")


class RunStartConflictError(StateError):
    """The run-start compare-and-set was rejected (002: ``state_run_start_conflict``)."""

    code = "state_run_start_conflict"
    default_message = _("The run could not be started")


class RequestKeyConflictError(StateError):
    """A request key was reused for other input (002, "Retried sends and request keys")."""

    code = "state_request_key_conflict"
    default_message = _("This request key was used for a different request")


class RequestAlreadyCompletedError(StateError):
    """A keyed send's run finished and a later run exists (002: re-anchor on the snapshot)."""

    code = "state_request_already_completed"
    default_message = _("This request already completed; reload the conversation")


class NotResumableError(StateError):
    """The requested resume cannot be served (002: e.g. cause ``resume_message_unknown``)."""

    code = "state_not_resumable"
    retryable = True
    default_message = _("The stream cannot be resumed from here; reload the conversation")


class RunSupersededError(StateError):
    """A write or submit by a run that a newer run superseded (002, "Superseded runs")."""

    code = "state_run_superseded"
    default_message = _("This run was superseded by a newer run")


class RunNotFoundError(StateError):
    """The run does not exist in this session."""

    code = "state_run_not_found"
    http_status = 404
    default_message = _("Run not found")


class RouteNotFoundError(HelixError):
    """No helix endpoint at this path (404): unknown paths under the API prefix answer typed JSON too."""

    code = "not_found"
    http_status = 404
    category = "validation"
    default_message = _("Not found")


class RouteNotWiredError(HelixError):
    """A chat or stream request reached Django's URLconf: the site's ASGI routing does not serve it (501).

    The chat and stream routes stream from ASGI consumers; a WSGI deployment, or an
    ``asgi.py`` without :func:`helix_django.transport.routing.get_asgi_application`, lands here.
    """

    code = "transport_route_not_wired"
    http_status = 501
    category = "transport"
    default_message = _("This route needs helix_django's ASGI routing (see the README's install section)")


class RunNotActionableError(StateError):
    """A recovery or control action does not apply to the run in its current state."""

    code = "state_run_not_actionable"
    default_message = _("This action does not apply to the run in its current state")


# --- transport -------------------------------------------------------------------------


class TransportError(HelixError):
    """A transport-level failure; retryable (503)."""

    code = "transport_error"
    http_status = 503
    retryable = True
    category = "transport"
    default_message = _("Transport error")


class ServerDrainingError(TransportError):
    """This process is stopping (SIGTERM) and starts no run; send again (another process takes it)."""

    code = "transport_server_draining"
    default_message = _("The server is restarting; send again")


class StreamDropError(TransportError):
    """The stream ended without a terminal, or a resumed run never went live (002)."""

    code = "transport_stream_drop"
    default_message = _("The stream was interrupted; resume from your cursor")


class StreamConnectionError(TransportError):
    """A stream manager's backend could not be reached; never read as "absent" (002, CP-28)."""

    code = "transport_stream_connection"
    default_message = _("The stream backend is unavailable")


class StreamFailedError(StateError):
    """A resume found the stream failed (002: 409 ``stream_failed``).

    The wire body keeps the run's classified failure as ``code``/``retryable`` when given.
    """

    code = "stream_failed"
    default_message = "stream_failed"


class StreamNotFoundError(HelixError):
    """The raw stream route was asked for a stream that does not exist (002: 404)."""

    code = "stream_not_found"
    http_status = 404
    category = "transport"
    default_message = _("Stream not found")


class StreamFenceError(RunSupersededError):
    """A stream write by a run that no longer holds the stream's claim."""


# --- validation ------------------------------------------------------------------------


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
    §15.5.6: a 405 must carry one) by :func:`helix_django.transport.sse.send_error`.
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


# --- auth ------------------------------------------------------------------------------


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


# --- runtime ---------------------------------------------------------------------------


class ProviderError(HelixError):
    """The model provider failed. ``retryable`` follows the provider's own classification."""

    code = "provider_error"
    http_status = 502
    category = "provider"
    default_message = _("The model provider failed")

    def __init__(self, message: str | None = None, *, retryable: bool = False, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self._retryable = retryable

    @property
    def is_retryable(self) -> bool:
        return self._retryable


class RunInterruptedError(HelixError):
    """The run stopped without finishing (process died, lease expired); partial output kept."""

    code = "run_interrupted"
    http_status = 503
    retryable = True
    category = "interrupted"
    default_message = _("The generation was interrupted")


class RunCancelledError(HelixError):
    """The run was cancelled by a person; never resumed on its own (000, "Cancellation")."""

    code = "run_cancelled"
    http_status = 409
    category = "cancelled"
    default_message = _("The generation was cancelled")


class ResponseTooLargeError(HelixError):
    """A run's answer grew past ``MAX_MESSAGE_BYTES``: the run fails, its answer so far kept as partial.

    The chunk that would pass the limit is neither stored nor sent; ``limitBytes``, ``sizeBytes``
    (what the message would have become). Not retryable: the same request grows the same answer.
    """

    code = "run_response_too_large"
    http_status = 413
    category = "limit"
    default_message = _("The answer is larger than the limit")


class ToolError(HelixError):
    """A server tool failed or its call was invalid."""

    code = "tool_error"
    http_status = 400
    category = "tool"
    default_message = _("The tool failed")


class InvalidToolResultError(ValidationError):
    """A submitted client-tool result or approval is invalid (002: 400 ``INVALID_RESULT``)."""

    default_message = _("Invalid tool result")

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("cause", "invalid_result")
        super().__init__(message, **kwargs)


class FrameworkInternalError(HelixError):
    """An unclassified failure, rendered typed and without its text (002)."""

    code = "framework_internal_error"
    http_status = 500
    default_message = _("Internal error")


class RateLimitedError(HelixError):
    """Too many requests (DRF throttling)."""

    code = "rate_limited"
    http_status = 429
    retryable = True
    category = "transport"
    default_message = _("Too many requests")


def as_helix_error(exc: BaseException) -> HelixError:
    """Return ``exc`` if it is a HelixError, else its typed stand-in without its text.

    A database failure (Django's ``DatabaseError``) is ``state_history_incomplete``
    (:func:`store_error_for`), as the executor's entry points raise it; anything else is a
    ``framework_internal_error`` (500).
    """
    if isinstance(exc, HelixError):
        return exc
    from django.db import DatabaseError

    if isinstance(exc, DatabaseError):
        return store_error_for(exc)
    return FrameworkInternalError()


def store_error_for(exc: BaseException) -> HistoryIncompleteError:
    """Return the ``state_history_incomplete`` error of the database error ``exc``.

    An integrity or data error (Django's ``IntegrityError``/``DataError``: a foreign-key or
    unique violation, a value too long for its column) is the same on every retry:
    ``store_rejected``, not retryable (409). Any other (unreachable, restarting, a dropped
    connection, a full disk, a lock timeout: ``OperationalError`` and the rest) is
    ``store_error``, retryable (503).
    """
    from django.db import DataError, IntegrityError

    if isinstance(exc, (IntegrityError, DataError)):
        return HistoryIncompleteError(cause="store_rejected")
    return HistoryIncompleteError(cause="store_error")


def http_status_for(exc: BaseException) -> int:
    """Return the HTTP status for any error (002, ``httpStatusForHelixError``)."""
    return as_helix_error(exc).status
