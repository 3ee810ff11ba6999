"""Shared fixtures: stream managers of every backend, users, sessions."""

from __future__ import annotations

import os

import pytest

from helix_django.streams import reset_stream_managers

# tests/host runs as its own pytest invocation with its own settings (``--ds=tests.host.settings``).
collect_ignore = [] if os.environ.get("DJANGO_SETTINGS_MODULE") == "tests.host.settings" else ["host"]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, django_db_blocker):
    """On PostgreSQL, drop the test databases of killed runs before creating ours (tests/pgdb.py)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        from tests.pgdb import drop_stale_databases

        with django_db_blocker.unblock(), connection._nodb_cursor() as cursor:
            dropped = drop_stale_databases(cursor)
        if dropped:
            print(f"\ntests: dropped {len(dropped)} stale PostgreSQL test database(s): {', '.join(dropped)}")


@pytest.fixture(scope="session", autouse=True)
def _close_thread_connections(django_db_setup, django_db_blocker):
    """Close connections async code opened in asgiref's ORM thread, before the test database is dropped.

    On PostgreSQL every other session still on the test database (a server process or
    thread of a test) is ended too, so Django's ``DROP DATABASE`` never fails (tests/pgdb.py).
    """
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connection, connections

    with django_db_blocker.unblock():
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()
        if connection.vendor == "postgresql":
            from tests.pgdb import end_other_connections

            name = connection.settings_dict["NAME"]
            with connection._nodb_cursor() as cursor:
                end_other_connections(cursor, name)


@pytest.fixture
def helix_live_server_class():
    """The kit's live-server fixtures build this suite's :class:`tests.live.LiveServer`."""
    from tests.live import LiveServer

    return LiveServer


@pytest.fixture
def daphne_server_factory(helix_server_factory):
    """The kit's ``helix_server_factory``: ``make(**LiveServer kwargs)``, started, stopped at teardown (tests/live.py)."""
    return helix_server_factory


@pytest.fixture
def daphne_server(helix_server):
    """A server (``HELIX_TEST_SERVER``, default daphne) running ``tests.asgi:application`` on the live test database."""
    return helix_server


@pytest.fixture(autouse=True)
def _fresh_stream_managers():
    """Every test gets fresh stream manager instances (no state across tests)."""
    reset_stream_managers()
    yield
    reset_stream_managers()


def redis_url() -> str:
    """Return the Redis URL tests use (a real redis-server; CI starts one): ``tests.settings.REDIS_URL``."""
    from tests.settings import REDIS_URL

    return REDIS_URL


@pytest.fixture
def private_redis(settings):
    """A redis-server of this test's own (free port, AOF on) as ``CACHES["helix_private"]``; killed after.

    For tests that stop, restart or kill Redis (the shared server is never restarted).
    Yields the :class:`tests.scale.services.RedisServer`, already started.
    """
    from tests.scale.services import RedisServer

    server = RedisServer()
    server.start()
    try:
        settings.CACHES = {
            **settings.CACHES,
            "helix_private": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": server.url},
        }
        yield server
    finally:
        server.cleanup()
