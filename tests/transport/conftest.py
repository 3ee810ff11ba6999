"""Fixtures of the transport tests: the live daphne server."""

from tests.live import daphne_server, daphne_server_factory  # noqa: F401
