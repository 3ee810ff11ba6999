"""Shared fixtures: stream managers of every backend, users, sessions."""

from __future__ import annotations

import os

import pytest

from helix_django.streams import reset_stream_managers


@pytest.fixture(scope="session", autouse=True)
def _close_thread_connections(django_db_setup, django_db_blocker):
    """Close connections async code opened in asgiref's ORM thread, before the test database is dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    with django_db_blocker.unblock():
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture(autouse=True)
def _fresh_stream_managers():
    """Every test gets fresh stream manager instances (no state across tests)."""
    reset_stream_managers()
    yield
    reset_stream_managers()


def redis_url() -> str:
    """Return the Redis URL tests use (a real redis-server; CI starts one)."""
    return os.environ.get("HELIX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
