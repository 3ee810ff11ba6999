"""Fixtures of the API tests: a daphne server whose agent asks two client tools, users, the live helpers."""

from __future__ import annotations

import httpx
import pytest

from tests.live import LiveServer
from tests.transport.conftest import agent_settings, users  # noqa: F401

CLIENT_TOOL_STEPS = [
    {
        "TEXT": "Pick two colors. ",
        "TOOL_CALLS": [
            {"name": "pick_color", "arguments": {"prompt": "first"}, "id": "call_1"},
            {"name": "pick_color", "arguments": {"prompt": "second"}, "id": "call_2"},
        ],
    },
    {"TEXT": "Thanks for the colors."},
]


@pytest.fixture(scope="module")
def tool_server(django_db_setup, django_db_blocker):
    """One server per module; its default agent suspends on two ``pick_color`` client-tool calls."""
    with django_db_blocker.unblock():
        server = LiveServer(helix=agent_settings(tools=["pick_color"], STEPS=CLIENT_TOOL_STEPS)).start()
    yield server
    server.stop()


@pytest.fixture
def api(users):  # noqa: F811
    """``api(name)`` -> an httpx.Client authenticated by token as user ``name``."""
    clients = []

    def make(name: str = "a") -> httpx.Client:
        client = httpx.Client(headers=users[name][1], timeout=10)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
