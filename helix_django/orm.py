"""ORM work from async code: ``sync_to_async`` that leaves no broken or pooled connection behind.

Every helix module that calls the ORM from a coroutine (the runtime, the stream manager,
the relaunch scan, the transport) goes through :func:`sync_to_async` of this module.
Django closes connections at request boundaries only (``close_old_connections`` on
``request_started``/``request_finished``); the threads asgiref runs this work on have no
requests, so without this a connection the database dropped (a restart,
``pg_terminate_backend``) would stay on its thread and every later call would fail with
it. Around each call, on the ORM's thread and outside any transaction:

- a connection that saw a database error and no longer answers is closed, so the next
  call opens a new one (Django's own test, ``close_if_unusable_or_obsolete``, without
  its ``CONN_MAX_AGE`` expiry: a persistent connection stays persistent);
- a pooled connection (``OPTIONS["pool"]``, Django's psycopg 3 pool) goes back to the
  pool after the call, so a process holds connections only while it uses them and the
  pool replaces broken ones (docs/scale-out.md, "Connections").

The writes of a live run (steps, terminal commits, run updates, lease renewals, stream
appends and endings) go through :func:`retrying`: a transient failure (the database
restarting, unreachable, locked or out of disk) is retried for up to
``HELIX["DATABASE_RETRY_SECONDS"]``, so a run survives a short outage; after that the
error propagates and the run ends with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import SyncToAsync
from django.db import DatabaseError, InterfaceError, OperationalError, connections

from helix_django.conf import helix_settings

__all__ = ["OrmSyncToAsync", "release_connections", "retrying", "sync_to_async"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
"""Failures of the connection or the server (not of the statement: IntegrityError, ProgrammingError, ...)."""
FIRST_RETRY_DELAY_SECONDS = 0.05
MAX_RETRY_DELAY_SECONDS = 1.0


def release_connections() -> None:
    """Close this thread's broken connections and return its pooled ones (outside a transaction).

    Never raises: a failed close leaves the connection object reset (Django's ``close``).
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or connection.in_atomic_block:
            continue
        pooled = bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))
        broken = connection.errors_occurred and not connection.is_usable()
        if pooled or broken:
            with contextlib.suppress(DatabaseError):
                connection.close()
        else:
            connection.errors_occurred = False


class OrmSyncToAsync(SyncToAsync):
    """asgiref's ``SyncToAsync`` (thread-sensitive by default) that calls :func:`release_connections` after the call."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        """Run the call on the ORM's thread, then release that thread's connections (even when it raised)."""
        try:
            return super().thread_handler(loop, *args, **kwargs)
        finally:
            release_connections()


sync_to_async = OrmSyncToAsync
"""Use as asgiref's ``sync_to_async(fn, thread_sensitive=True)`` (decorator or call)."""


def retrying(fn: Callable[..., T], *, what: str = "") -> Callable[..., Awaitable[T]]:
    """Return an async twin of ``fn`` (run by :func:`sync_to_async`) that retries transient failures.

    An ``OperationalError``/``InterfaceError`` is retried with a backoff (50 ms doubling to
    1 s) until ``HELIX["DATABASE_RETRY_SECONDS"]`` (default 10) have passed since the first
    failure; then the last error is raised. ``fn`` must be safe to run again after a failed
    attempt: one transaction whose failure commits nothing, or an idempotent write. Other
    errors are raised at once.
    """
    call = sync_to_async(fn)
    label = what or getattr(fn, "__name__", "write")

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        return await retry_transient(label, call, *args, **kwargs)

    return wrapper


async def retry_transient(what: str, call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await ``call(*args, **kwargs)``, retrying transient database failures (see :func:`retrying`)."""
    loop = asyncio.get_running_loop()
    deadline: float | None = None
    delay = FIRST_RETRY_DELAY_SECONDS
    while True:
        try:
            return await call(*args, **kwargs)
        except TRANSIENT_ERRORS as exc:
            now = loop.time()
            if deadline is None:
                deadline = now + float(helix_settings.DATABASE_RETRY_SECONDS)
            if now + delay > deadline:
                logger.warning("database %s failed for good: %s", what, type(exc).__name__)
                raise
            logger.warning("database %s failed (%s); retrying in %.2f s", what, type(exc).__name__, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY_SECONDS)
