"""What the entry points share: typed errors only, the run lookups."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

from django.db import DatabaseError

from helix_django.errors import (
    FrameworkInternalError,
    HelixError,
    RunNotFoundError,
    store_error_for,
)
from helix_django.models import ChatSession, Run
from helix_django.orm import sync_to_async

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def typed_errors(name: str, log: logging.Logger = logger) -> Iterator[None]:
    """Let the block raise typed HelixErrors only (STYLE, "Errors"; internals, "Runtime").

    A HelixError passes unchanged; a DatabaseError becomes a HistoryIncompleteError
    (``state_history_incomplete``: ``store_error``, retryable, or ``store_rejected`` for an
    integrity or data error; :func:`~helix_django.errors.store_error_for`), any other
    Exception a FrameworkInternalError; neither keeps the cause's text. A BaseException (a
    cancel) passes unchanged. ``name``: the entry point, in the line logged to ``log``.
    """
    try:
        yield
    except HelixError:
        raise
    except DatabaseError as exc:
        log.warning("executor %s: database failure %s", name, type(exc).__name__)
        raise store_error_for(exc) from exc
    except Exception as exc:
        log.error("executor %s failed: %s", name, type(exc).__name__)
        raise FrameworkInternalError() from exc


def typed(method: Any) -> Any:
    """Make an async entry point raise typed HelixErrors only (:func:`typed_errors`)."""

    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with typed_errors(method.__name__):
            return await method(*args, **kwargs)

    return wrapper


def _get_run(session_id: str, run_id: str) -> Run:
    run = Run.objects.filter(pk=run_id, session_id=session_id).first()
    if run is None:
        raise RunNotFoundError()
    return run


def _current_run(session_id: str) -> Run | None:
    session = ChatSession.objects.filter(pk=session_id).first()
    return Run.objects.filter(pk=session.current_run_id).first() if session and session.current_run_id else None


aget_run = sync_to_async(_get_run)
acurrent_run = sync_to_async(_current_run)
