"""The HelixError tree: every refusal helix_django makes, as a typed error.

All transports render one flat body, the reference's (002, "Wire errors")::

    {"error": "<message>", "code": "<code>", "retryable": bool, "cause": "<reason>"?, ...extra}

``extra`` holds the additional fields a row of the wire-error table names (``runId``,
``limitBytes``, ``sizeBytes``, ...). The message is fixed per class or given by our own
code; it never echoes free text from a cause (an exception's text, a prompt, a tool
argument). Released ``code`` strings never change. Messages are translated (gettext_lazy,
resolved in the language active when the error is rendered); codes stay English
identifiers; ``stream_failed``'s message is the reference's wire marker and stays as it is.

The families live in their own modules: :mod:`~helix_django.errors.base` (HelixError),
:mod:`~helix_django.errors.state`, :mod:`~helix_django.errors.transport`,
:mod:`~helix_django.errors.request` (validation and auth), :mod:`~helix_django.errors.run`
(provider, tool, interruption, cancellation), and :mod:`~helix_django.errors.convert` (any
exception to its HelixError and status). Import every name from here. Nothing in this
package imports DRF or Channels.
"""

from helix_django.errors.base import (
    HelixError,
)
from helix_django.errors.convert import (
    as_helix_error,
    http_status_for,
    store_error_for,
)
from helix_django.errors.request import (
    AuthenticationFailedError,
    InvalidToolResultError,
    MessageTooLargeError,
    MethodNotAllowedError,
    NotAcceptableError,
    NotAuthenticatedError,
    PayloadTooLargeError,
    PermissionDeniedError,
    UnsupportedMediaTypeError,
    ValidationError,
)
from helix_django.errors.run import (
    FrameworkInternalError,
    ProviderError,
    ResponseTooLargeError,
    RunCancelledError,
    RunInterruptedError,
    ToolError,
)
from helix_django.errors.state import (
    NOT_RETRYABLE_HISTORY_CAUSES,
    AlreadyRunningError,
    HistoryIncompleteError,
    NotResumableError,
    QueuedMessageNotFoundError,
    QueuedMessageNotQueuedError,
    RequestAlreadyCompletedError,
    RequestKeyConflictError,
    RunNotActionableError,
    RunNotFoundError,
    RunStartConflictError,
    RunSupersededError,
    SessionFullError,
    SessionNotFoundError,
    StateError,
    StreamFailedError,
    StreamFenceError,
)
from helix_django.errors.transport import (
    BudgetExceededError,
    RateLimitedError,
    RouteNotFoundError,
    RouteNotWiredError,
    ServerDrainingError,
    StreamConnectionError,
    StreamDropError,
    StreamNotFoundError,
    TransportError,
)

__all__ = [
    "AlreadyRunningError",
    "AuthenticationFailedError",
    "FrameworkInternalError",
    "HelixError",
    "HistoryIncompleteError",
    "InvalidToolResultError",
    "MessageTooLargeError",
    "MethodNotAllowedError",
    "NOT_RETRYABLE_HISTORY_CAUSES",
    "NotAcceptableError",
    "NotAuthenticatedError",
    "NotResumableError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProviderError",
    "BudgetExceededError",
    "RateLimitedError",
    "RequestAlreadyCompletedError",
    "RequestKeyConflictError",
    "ResponseTooLargeError",
    "RouteNotFoundError",
    "RouteNotWiredError",
    "RunCancelledError",
    "RunInterruptedError",
    "QueuedMessageNotFoundError",
    "QueuedMessageNotQueuedError",
    "RunNotActionableError",
    "RunNotFoundError",
    "RunStartConflictError",
    "RunSupersededError",
    "ServerDrainingError",
    "SessionFullError",
    "SessionNotFoundError",
    "StateError",
    "StreamConnectionError",
    "StreamDropError",
    "StreamFailedError",
    "StreamFenceError",
    "StreamNotFoundError",
    "ToolError",
    "TransportError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "as_helix_error",
    "http_status_for",
    "store_error_for",
]
