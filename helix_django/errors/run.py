"""How a run ends without an answer: provider and tool failures, interruption, cancellation, limits."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from helix_django.errors.base import HelixError


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


class FrameworkInternalError(HelixError):
    """An unclassified failure, rendered typed and without its text (002)."""

    code = "framework_internal_error"
    http_status = 500
    default_message = _("Internal error")
