"""Scale-out test settings: tests/settings.py plus the channels_redis layer (and, by env, Redis streams).

Env: ``HELIX_TEST_REDIS_URL`` (the Redis of the layer and of CACHES["helix"]),
``HELIX_TEST_LAYER_PREFIX`` (channels_redis key prefix, so concurrent test runs never share
groups), ``HELIX_TEST_STREAM_PREFIX`` (when set, the default stream manager is the Redis one
with this key prefix). HELIX_TEST_OVERRIDES still applies (tests/settings.py).
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import HELIX, REDIS_URL

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 defaults socket_timeout to 5 s, the layer's BZPOPMIN wait (channels_redis#422).
            "hosts": [{"address": REDIS_URL, "socket_timeout": 10}],
            "prefix": os.environ.get("HELIX_TEST_LAYER_PREFIX", "helix-test"),
            "capacity": 1000,
        },
    }
}
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
