"""The runtime inside a real daphne server: a send streams over HTTP, a client that drops does not stop the run."""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Run
from tests.transport.conftest import agent_settings, chat_url, new_session_id, read_sse, send_body, user_message, users  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

REPLY = " ".join(f"token{i}" for i in range(80)) + "."


def wait_for_status(run_id: str, status: str, timeout: float = 20) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = Run.objects.filter(pk=run_id).first()
        if run is not None and run.status == status:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never became {status}")


def test_send_streams_from_the_server_and_survives_a_dropped_client(daphne_server_factory, users):  # noqa: F811
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, PACE_TPS=80))
    _user, headers = users["a"]
    session_id = new_session_id()
    with httpx.Client(timeout=30, headers=headers) as client:
        full = read_sse(
            client, "POST", chat_url(server, session_id), json=send_body(session_id, [user_message("first")])
        )
        assert full.status == 200 and full.done
        assert full.text == REPLY
        types = [c["type"] for c in full.chunks]
        assert types[0] == "start" and types[-1] == "finish"
        assert not any(t.startswith("helix-") for t in types)  # internal chunks never reach a client

        dropped = read_sse(
            client,
            "POST",
            chat_url(server, session_id),
            json=send_body(session_id, [user_message("second")]),
            stop_after=5,
        )
        assert dropped.status == 200 and not dropped.done
    run = Run.objects.filter(session_id=session_id).order_by("-created_at").first()
    run = wait_for_status(run.id, "completed")  # the run went on without its client
    assert run.lease_owner == "" and run.step_count == 1
