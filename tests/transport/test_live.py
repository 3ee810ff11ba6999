"""The live daphne helper itself: start, answer, SIGKILL, restart on the same port, graceful stop."""

from __future__ import annotations

import httpx
import pytest

from tests.live import LiveServer


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_start_kill_restart_stop(daphne_server_factory):
    server = daphne_server_factory(asgi_app="tests.transport.ping_app:application")
    assert isinstance(server, LiveServer)
    first = httpx.get(server.url("/ping"))
    assert first.status_code == 200
    environment = server.environment()
    expected = environment.get("HELIX_SQLITE_PATH") or environment["HELIX_TEST_DATABASE_URL"]
    assert first.json()["database"] == expected
    pid = server.process.pid
    assert server.kill() == -9
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url("/ping"), timeout=1)
    port = server.port
    server.start()
    assert server.port == port and server.process.pid != pid
    assert httpx.get(server.url("/ping")).json()["pid"] == server.process.pid
    assert server.stop() == 0
    assert not server.is_running
