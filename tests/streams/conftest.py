"""Backends the stream-manager contract suite runs against, and builders of Redis managers for the Redis-only tests."""

from __future__ import annotations

import uuid

import pytest
import redis

from helix_django.streams import load_stream_manager
from tests.conftest import redis_url

BACKENDS = {
    "memory": {"BACKEND": "helix_django.streams.memory.MemoryStreamManager", "OPTIONS": {}},
    "database": {"BACKEND": "helix_django.streams.database.DatabaseStreamManager", "OPTIONS": {}},
    # A real redis-server (HELIX_TEST_REDIS_URL through CACHES["helix"]); unreachable Redis fails, never skips.
    "redis": {"BACKEND": "helix_django.streams.redis.RedisStreamManager", "OPTIONS": {"CONNECTION_ALIAS": "helix"}},
}


def redis_options(**extra) -> dict:
    """OPTIONS for a Redis manager with a key prefix of its own (tests never share keys)."""
    return {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": f"helix-test:{uuid.uuid4().hex}", "stream_ttl": 600, **extra}


def redis_manager(alias: str = "helix", **options):
    """A Redis stream manager on keys of its own (``options`` over :func:`redis_options`)."""
    config = {"BACKEND": BACKENDS["redis"]["BACKEND"], "OPTIONS": redis_options(CONNECTION_ALIAS=alias, **options)}
    return load_stream_manager("r", {"r": config})


def another_redis_process(manager):
    """Another Redis manager instance on ``manager``'s keys: its own tail, listener and origin (another process)."""
    return load_stream_manager("r2", {"r2": {"BACKEND": BACKENDS["redis"]["BACKEND"], "OPTIONS": {**manager.options}}})


@pytest.fixture(params=sorted(BACKENDS))
def backend_name(request):
    """Name of the backend under test."""
    return request.param


@pytest.fixture
async def manager(backend_name):
    """A fresh stream manager of each backend (the contract module marks django_db(transaction=True))."""
    config = dict(BACKENDS)
    if backend_name == "redis":
        config["redis"] = {**BACKENDS["redis"], "OPTIONS": redis_options()}
    manager = load_stream_manager(backend_name, config)
    yield manager
    await manager.aclose()


@pytest.fixture
def redis_client():
    """A plain redis-py client of the test Redis (replies decoded to str), to read what a manager wrote."""
    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    yield client
    client.close()
