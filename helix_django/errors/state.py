"""Refusals from the session's state: conflicts, unknown sessions and runs, unreadable history (409/404/503)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from helix_django.errors.base import HelixError


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


class RunNotActionableError(StateError):
    """A recovery or control action does not apply to the run in its current state."""

    code = "state_run_not_actionable"
    default_message = _("This action does not apply to the run in its current state")


class StreamFailedError(StateError):
    """A resume found the stream failed (002: 409 ``stream_failed``).

    The wire body keeps the run's classified failure as ``code``/``retryable`` when given.
    """

    code = "stream_failed"
    default_message = "stream_failed"


class StreamFenceError(RunSupersededError):
    """A stream write by a run that no longer holds the stream's claim."""


class QueuedMessageNotFoundError(StateError):
    """The queued message does not exist in this session (404)."""

    code = "state_queued_message_not_found"
    http_status = 404
    default_message = _("Queued message not found")


class QueuedMessageNotQueuedError(StateError):
    """The queued message already started, was removed, or was refused at its start (409).

    ``runId``: the run it started, when it did.
    """

    code = "state_queued_message_not_queued"
    default_message = _("This message is no longer queued")
