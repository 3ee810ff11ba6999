"""Conversion of any exception to its HelixError and HTTP status; database errors to ``state_history_incomplete``."""

from __future__ import annotations

from django.db import DatabaseError, DataError, IntegrityError

from helix_django.errors.base import HelixError
from helix_django.errors.run import FrameworkInternalError
from helix_django.errors.state import HistoryIncompleteError


def as_helix_error(exc: BaseException) -> HelixError:
    """Return ``exc`` if it is a HelixError, else its typed stand-in without its text.

    A database failure (Django's ``DatabaseError``) is ``state_history_incomplete``
    (:func:`store_error_for`), as the executor's entry points raise it; anything else is a
    ``framework_internal_error`` (500).
    """
    if isinstance(exc, HelixError):
        return exc
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
    if isinstance(exc, (IntegrityError, DataError)):
        return HistoryIncompleteError(cause="store_rejected")
    return HistoryIncompleteError(cause="store_error")


def http_status_for(exc: BaseException) -> int:
    """Return the HTTP status for any error (002, ``httpStatusForHelixError``)."""
    return as_helix_error(exc).status
