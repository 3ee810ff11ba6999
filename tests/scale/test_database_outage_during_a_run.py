"""A short database outage: a live run rides it out, a send meanwhile is a quick typed 503, then sends work again.

A private PostgreSQL (tests/scale/services.py) and one daphne process (the test suite's
site: one kept connection per ORM thread). The run's writes are retried for up to
``HELIX["DATABASE_RETRY_SECONDS"]`` (issue 21, finding 4).
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.live import LiveServer
from tests.scale.pgsite import prepare_site
from tests.scale.services import PostgresServer
from tests.scale.test_database_connection_faults import send

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

WORDS = [f"w{i}" for i in range(40)]
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": " ".join(WORDS), "PACE_TPS": 10},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "DATABASE_RETRY_SECONDS": 10,
}
SEND_REFUSAL_SECONDS = 6


@pytest.fixture
def site():
    """(LiveServer on a private PostgreSQL, DRF token, the PostgreSQL)."""
    postgres = PostgresServer().init()
    env = {"HELIX_TEST_DATABASE_URL": postgres.url("helix"), "HELIX_TEST_OVERRIDES": json.dumps(HELIX)}
    server = None
    try:
        token = prepare_site(postgres, "tests.settings", env)
        server = LiveServer(settings_module="tests.settings", env=env)
        yield server.start(), token, postgres
    finally:
        if server is not None:
            server.stop()
        postgres.cleanup()


def read_text(client: httpx.Client, server: LiveServer, out: dict) -> None:
    """Send one message and read its stream to the end into ``out`` (text, types, done)."""
    sid = "chat_outage_run"
    message = {"id": "u_outage", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    from httpx_sse import EventSource

    with client.stream("POST", server.url(f"/helix/api/sessions/{sid}/chat"), json=body) as response:
        out["status"] = response.status_code
        for sse in EventSource(response).iter_sse():
            if sse.data == "[DONE]":
                out["done"] = True
                break
            if sse.id and sse.data:
                chunk = json.loads(sse.data)
                out.setdefault("types", []).append(chunk["type"])
                if chunk["type"] == "text-delta":
                    out.setdefault("text", []).append(chunk["delta"])


def test_a_run_survives_a_postgres_restart_and_a_send_while_it_is_down_is_a_quick_typed_503(site):
    server, token, postgres = site
    with httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=60) as client:
        out: dict = {}
        reader = threading.Thread(target=read_text, args=(client, server, out))
        reader.start()
        time.sleep(1.0)  # the run is streaming (4 s of text)
        postgres.restart()
        reader.join(60)
        assert out.get("done"), out
        assert "".join(out["text"]).split() == WORDS
        assert "error" not in out["types"] and out["types"][-1] == "finish", out["types"][-3:]

        postgres.stop()
        try:
            started = time.monotonic()
            status, error = send(client, server)
            assert time.monotonic() - started < SEND_REFUSAL_SECONDS
            assert status == 503 and error["retryable"] is True, (status, error)
        finally:
            postgres.start()
        started = time.monotonic()
        while send(client, server)[0] != 200:
            assert time.monotonic() - started < 10, server.log_text()[-3000:]
            time.sleep(0.2)
