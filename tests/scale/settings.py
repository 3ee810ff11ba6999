"""Scale-out test settings: tests/settings.py plus the channels_redis layer (and, by env, Redis streams).

Env: ``HELIX_TEST_REDIS_URL`` (the Redis of the layer and of CACHES["helix"]),
``HELIX_TEST_LAYER_PREFIX`` (channels_redis key prefix, so concurrent test runs never share
groups), ``HELIX_TEST_LAYER`` (``redis``, the default, or ``memory``: the in-memory layer), ``HELIX_TEST_STREAM_PREFIX`` (when set, the default stream manager is the Redis one
with this key prefix). HELIX_TEST_OVERRIDES still applies (tests/settings.py).
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import HELIX, REDIS_URL


def redis_channel_layer(prefix: str) -> dict:
    """Return CHANNEL_LAYERS for a channels_redis layer on the test Redis, its keys under ``prefix``.

    Every process of one test (daphne servers, task workers, the test itself) passes the
    same prefix, so they share groups with each other and with no other test.
    """
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 defaults socket_timeout to 5 s, the layer's BZPOPMIN wait (channels_redis#422).
                "hosts": [{"address": REDIS_URL, "socket_timeout": 10}],
                "prefix": prefix,
                "capacity": 1000,
            },
        }
    }


CHANNEL_LAYERS = redis_channel_layer(os.environ.get("HELIX_TEST_LAYER_PREFIX", "helix-test"))
if os.environ.get("HELIX_TEST_LAYER") == "memory":
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
if os.environ.get("HELIX_TEST_STREAM_PREFIX"):
    HELIX = {
        **HELIX,
        "STREAM_MANAGERS": {
            "default": {
                "BACKEND": "helix_django.streams.redis.RedisStreamManager",
                "OPTIONS": {
                    "CONNECTION_ALIAS": "helix",
                    "KEY_PREFIX": os.environ["HELIX_TEST_STREAM_PREFIX"],
                    "stream_ttl": 3600,
                },
            }
        },
    }
