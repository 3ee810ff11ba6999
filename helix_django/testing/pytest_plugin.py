"""pytest fixtures of helix_django's test kit (needs pytest-django).

Enable in the host's top-level ``conftest.py``::

    pytest_plugins = ["helix_django.testing.pytest_plugin"]

Fixtures:

- ``helix_server_factory``: ``make(**LiveServer keyword arguments) -> LiveServer``, started;
  every server it made is stopped at teardown. Requires ``transactional_db``, so what the
  test writes is committed where the server reads it.
- ``helix_server``: one server of ``settings.ASGI_APPLICATION`` for the test.
- ``helix_chat``: a :class:`~helix_django.testing.ChatClient` on ``helix_server`` (no
  authentication headers; build your own client for a signed-in user).
- ``fake_openai``: a started :class:`~helix_django.testing.FakeOpenAI`.
- ``helix_live_server_class``: the class the factory builds (override it to change how
  servers are started, e.g. a subclass with other ``database_env``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from helix_django.testing.client import ChatClient
from helix_django.testing.fake_openai import FakeOpenAI
from helix_django.testing.live import LiveServer


@pytest.fixture
def helix_live_server_class() -> type[LiveServer]:
    """The :class:`LiveServer` class ``helix_server_factory`` builds."""
    return LiveServer


@pytest.fixture
def helix_server_factory(
    transactional_db: None, helix_live_server_class: type[LiveServer]
) -> Iterator[Callable[..., LiveServer]]:
    """Return ``make(**kwargs) -> LiveServer`` (started); every server is stopped at teardown."""
    servers: list[LiveServer] = []

    def make(**kwargs: Any) -> LiveServer:
        server = helix_live_server_class(**kwargs)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def helix_server(helix_server_factory: Callable[..., LiveServer]) -> LiveServer:
    """A started server of the host's ASGI app on the test databases."""
    return helix_server_factory()


@pytest.fixture
def helix_chat(helix_server: LiveServer) -> Iterator[ChatClient]:
    """A :class:`ChatClient` on ``helix_server`` (prefix ``/helix/api``)."""
    with ChatClient(helix_server.base_url) as client:
        yield client


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started OpenAI-compatible server on loopback (``.base_url``, ``.replies``, ``.requests``)."""
    with FakeOpenAI() as server:
        yield server
