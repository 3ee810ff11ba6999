"""A live host site per profile (:mod:`tests.host.profiles`), its users and a client for every surface.

``host_site("admin_only")`` starts daphne serving ``tests.host.asgi:application`` with that
profile's settings on the live test database, and returns a :class:`HostSite`: users
``alice``, ``bob`` (ordinary) and ``staff`` (``is_staff``), each with a JWT, and helpers that
speak real HTTP (httpx) and real WebSockets (websockets) to it.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.live import LiveServer

PREFIX = "/helix/api"
HOST_HEADER = "127.0.0.1"


def new_session_id() -> str:
    """A fresh public session id."""
    return f"s_{uuid.uuid4().hex}"


def user_message(text: str = "hello") -> dict[str, Any]:
    """A UIMessage of the user."""
    return {"id": f"msg_{uuid.uuid4().hex}", "role": "user", "parts": [{"type": "text", "text": text}]}


@dataclass
class HostUser:
    """A user of the host's model and its ``Authorization`` header."""

    user: Any
    headers: dict[str, str]


@dataclass
class HostSite:
    """One live host site (see the module docstring)."""

    server: LiveServer
    users: dict[str, HostUser] = field(default_factory=dict)
    root: str = ""
    """The path a proxy strips before the request reaches daphne (``--root-path``): never in the URLs it is sent."""

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on the site."""
        return self.server.url(path)

    def request(self, method: str, path: str, user: str | None = None, **kwargs: Any) -> httpx.Response:
        """One HTTP request as ``user`` (None: anonymous); the body is read whole."""
        headers = {**(self.users[user].headers if user else {}), **kwargs.pop("headers", {})}
        return httpx.request(method, self.url(path), headers=headers, timeout=30, **kwargs)

    def send(self, session_id: str, user: str | None = None, text: str = "hello", **kwargs: Any) -> httpx.Response:
        """POST a new user message to the chat route; the SSE body is read to its end."""
        body = {"id": session_id, "messages": [user_message(text)]}
        return self.request("POST", f"{PREFIX}/sessions/{session_id}/chat", user, json=body, **kwargs)

    def ws(self, session_id: str, user: str | None = None, headers: dict[str, str] | None = None) -> ClientConnection:
        """Open the session's WebSocket as ``user``; raises websockets' InvalidStatus when the handshake is refused."""
        url = f"{self.server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/"
        all_headers = {**(self.users[user].headers if user else {}), **(headers or {})}
        return connect(url, additional_headers=all_headers, max_size=None, open_timeout=10)


def ws_frames(ws: ClientConnection, *, until: tuple[str, ...] = ("end", "fail", "error"), timeout: float = 20) -> list:
    """Frames of ``ws`` up to and including the first of type ``until``."""
    frames = []
    while True:
        frame = json.loads(ws.recv(timeout=timeout))
        frames.append(frame)
        if frame.get("type") in until:
            return frames


def close_code(ws: ClientConnection, timeout: float = 10) -> int | None:
    """Wait for the server to close ``ws``; return its close code."""
    try:
        while True:
            ws.recv(timeout=timeout)
    except Exception:  # noqa: BLE001 - ConnectionClosed* or a time-out: the code says which
        pass
    return ws.close_code


def make_users() -> dict[str, HostUser]:
    """alice, bob and staff in the host's user model, each with a JWT ``Authorization`` header."""
    from django.contrib.auth import get_user_model
    from rest_framework_simplejwt.tokens import AccessToken

    users = {}
    for name in ("alice", "bob", "staff"):
        user = get_user_model().objects.create_user(
            email=f"{name}-{uuid.uuid4().hex[:6]}@host.example", password="pw-1", is_staff=name == "staff"
        )
        users[name] = HostUser(user, {"Authorization": f"Bearer {AccessToken.for_user(user)}"})
    return users


@pytest.fixture
def host_site(transactional_db):
    """Start a live host site of a profile: ``host_site("admin_only", helix={...})``; stopped at teardown."""
    from django.conf import settings

    started: list[LiveServer] = []
    users = make_users()

    def make(profile: str = "plain", *, root: str = "", helix: dict[str, Any] | None = None) -> HostSite:
        cache_dir = tempfile.mkdtemp(prefix="helix-host-cache-")
        server = LiveServer(
            asgi_app="tests.host.asgi:application",
            settings_module="tests.host.profiles",
            env={
                "HELIX_HOST_PROFILE": profile,
                "HELIX_HOST_CACHE_DIR": cache_dir,
                "HELIX_HOST_STATIC_ROOT": str(settings.STATIC_ROOT),  # collected by the conftest, with its manifest
            },
            helix=helix,
            extra_args=["--root-path", root] if root else [],
        )
        started.append(server)
        server.start()
        return HostSite(server=server, users=users, root=root)

    yield make
    for server in started:
        server.stop()
