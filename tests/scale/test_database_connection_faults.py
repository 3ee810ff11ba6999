"""A server whose database connections die recovers by itself: ``pg_terminate_backend`` of all its connections.

A private PostgreSQL (tests/scale/services.py) and one daphne process, configured either
as the test suite's site (one connection per ORM thread, kept) or as the example site
(Django's psycopg 3 pool, docs/scale-out.md). After a run completes, every connection of
the site is terminated by the database. New sends must work again within seconds, each
refusal meanwhile a typed JSON error, never an untyped 500, and never needing a restart
(issue 21, finding 3).
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from httpx_sse import EventSource

from tests.live import LiveServer
from tests.scale.pgsite import prepare_site
from tests.scale.services import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

RECOVERY_SECONDS = 10
SITES = {
    "kept-connections": ("tests.settings", "tests.asgi:application", "HELIX_TEST_DATABASE_URL"),
    "pool": ("example_project.settings", "example_project.asgi:application", "DATABASE_URL"),
}
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": "one two three four", "PACE_TPS": 100},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
}


@pytest.fixture(params=list(SITES))
def site(request):
    """(LiveServer on a private PostgreSQL, DRF token, the PostgreSQL), per site configuration."""
    settings_module, app, url_variable = SITES[request.param]
    postgres = PostgresServer().init()
    env = {url_variable: postgres.url("helix"), "HELIX_TEST_OVERRIDES": json.dumps(HELIX), "HELIX_DEMO_PACE": "100"}
    server = None
    try:
        token = prepare_site(postgres, settings_module, env)
        server = LiveServer(asgi_app=app, settings_module=settings_module, env=env)
        yield server.start(), token, postgres
    finally:
        if server is not None:
            server.stop()
        postgres.cleanup()


def send(client: httpx.Client, server: LiveServer) -> tuple[int, dict | None]:
    """Send one message in a new session and read it to the end; return (status, typed error body or None).

    A 200 whose stream ends without ``[DONE]`` or with an error frame counts as status 0 with that frame.
    """
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    with client.stream("POST", server.url(f"/helix/api/sessions/{sid}/chat"), json=body) as response:
        if response.status_code != 200:
            return response.status_code, json.loads(response.read() or b"null")
        for sse in EventSource(response).iter_sse():
            if sse.data == "[DONE]":
                return 200, None
            if sse.event == "error" or '"type":"error"' in sse.data.replace(" ", ""):
                return 0, json.loads(sse.data)
    return 0, None


def test_sends_work_again_within_seconds_after_the_database_killed_every_connection(site):
    server, token, postgres = site
    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=30) as client:
        assert send(client, server) == (200, None)
        killed = postgres.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = 'helix' AND pid <> pg_backend_pid()"
        )[0][0]
        assert killed >= 1
        refusals, started = [], time.monotonic()
        while True:
            status, error = send(client, server)
            if status == 200:
                break
            refusals.append((status, error))
            assert time.monotonic() - started < RECOVERY_SECONDS, (refusals[-3:], server.log_text()[-3000:])
            time.sleep(0.2)
        # Every refusal on the way is typed and retryable; then sends keep working.
        for status, error in refusals:
            assert status == 503 and error["retryable"] is True, (status, error)
        assert [send(client, server)[0] for _ in range(3)] == [200, 200, 200]
