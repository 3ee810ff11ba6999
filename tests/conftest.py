"""Shared fixtures: stream managers of every backend, users, sessions."""

from __future__ import annotations

import os

import pytest

from helix_django.streams import reset_stream_managers


@pytest.fixture(autouse=True)
def _fresh_stream_managers():
    """Every test gets fresh stream manager instances (no state across tests)."""
    reset_stream_managers()
    yield
    reset_stream_managers()


def redis_url() -> str:
    """Return the Redis URL tests use (a real redis-server; CI starts one)."""
    return os.environ.get("HELIX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
