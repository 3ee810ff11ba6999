"""Bounded database connections: the example site on a PostgreSQL with few connection slots serves 60 clients.

A private PostgreSQL with ``max_connections=30`` (27 for clients: 3 are reserved for
superusers), one daphne process of ``example_project`` configured by ``DATABASE_URL``
exactly as docs/scale-out.md says. 60 clients at once each send a message, read the run
to its end and read the session's snapshot while it streams. Every answer is a 200: no
"remaining connection slots are reserved" 500 (issue 21, finding 2).
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from httpx_sse import EventSource

from tests.live import LiveServer
from tests.scale.pgsite import prepare_site
from tests.scale.services import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CLIENTS = 60
SNAPSHOTS_PER_CLIENT = 3


@pytest.fixture
def site():
    """(LiveServer of example_project on a private PostgreSQL with max_connections=30, DRF token, the PostgreSQL)."""
    postgres = PostgresServer(max_connections=30).init()
    env = {"DATABASE_URL": postgres.url("helix"), "HELIX_DEMO_PACE": "50", "HELIX_LOG_LEVEL": "WARNING"}
    server = None
    try:
        token = prepare_site(postgres, "example_project.settings", env)
        server = LiveServer(
            asgi_app="example_project.asgi:application", settings_module="example_project.settings", env=env
        )
        yield server.start(), token, postgres
    finally:
        if server is not None:
            server.stop()
        postgres.cleanup()


async def one_client(client: httpx.AsyncClient, server: LiveServer) -> list[int]:
    """Send one message in a new session, read its SSE to [DONE] and the snapshot meanwhile; return every status."""
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    statuses: list[int] = []
    async with client.stream("POST", server.url(f"/helix/api/sessions/{sid}/chat"), json=body) as response:
        statuses.append(response.status_code)
        if response.status_code != 200:
            return statuses
        done = False
        async for sse in EventSource(response).aiter_sse():
            if sse.data == "[DONE]":
                done = True
                break
            if sse.event == "error":
                statuses.append(599)
            if len(statuses) <= SNAPSHOTS_PER_CLIENT and sse.id:
                snapshot = await client.get(server.url(f"/helix/api/sessions/{sid}/snapshot"))
                statuses.append(snapshot.status_code)
        statuses.append(200 if done else 598)  # 598: the body ended without [DONE] (a drop)
    return statuses


async def test_sixty_clients_on_thirty_connection_slots_get_no_error(site):
    server, token, postgres = site
    limits = httpx.Limits(max_connections=CLIENTS * 2, max_keepalive_connections=CLIENTS * 2)
    async with httpx.AsyncClient(headers={"Authorization": f"Token {token}"}, timeout=120, limits=limits) as client:
        results = await asyncio.gather(*(one_client(client, server) for _ in range(CLIENTS)))
    statuses = [status for result in results for status in result]
    errors = [status for status in statuses if status != 200]
    assert errors == [], (errors, server.log_text()[-3000:])
    assert len(statuses) == CLIENTS * (SNAPSHOTS_PER_CLIENT + 2)
    # The connections the site holds at the end are bounded by its pool, not by its clients.
    held = postgres.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'helix'")[0][0]
    assert held <= 10, held
