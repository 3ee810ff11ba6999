"""tests.settings with a strict ``ALLOWED_HOSTS`` (loopback only), for test_servers_serve_every_route."""

from tests.settings import *  # noqa: F403

ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
