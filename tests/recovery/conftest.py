"""Fixtures of the recovery tests: the live daphne server and a chat client that reads SSE."""

from tests.live import daphne_server_factory  # noqa: F401
