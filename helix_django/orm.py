"""ORM work from async code: ``sync_to_async`` that leaves no broken or pooled connection behind.

Every helix module that calls the ORM from a coroutine (the runtime, the stream manager,
the relaunch scan, the transport) goes through :func:`sync_to_async` of this module.
Django closes connections at request boundaries only (``close_old_connections`` on
``request_started``/``request_finished``); the threads asgiref runs this work on have no
requests, so without this a connection the database dropped (a restart,
``pg_terminate_backend``) stayed on its thread and every later call failed with it
(issue 21). Around each call, on the ORM's thread and outside any transaction:

- a connection that saw a database error and no longer answers is closed, so the next
  call opens a new one (Django's own test, ``close_if_unusable_or_obsolete``, without
  its ``CONN_MAX_AGE`` expiry: a persistent connection stays persistent);
- a pooled connection (``OPTIONS["pool"]``, Django's psycopg 3 pool) goes back to the
  pool after the call, so a process holds connections only while it uses them and the
  pool replaces broken ones (docs/scale-out.md, "Connections").
"""

from __future__ import annotations

import contextlib
from typing import Any

from asgiref.sync import SyncToAsync
from django.db import DatabaseError, connections

__all__ = ["OrmSyncToAsync", "release_connections", "sync_to_async"]


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
