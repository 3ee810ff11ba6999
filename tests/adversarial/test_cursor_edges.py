"""Valid but extreme cursors: far ahead of the head, at the head, at 0, on live and ended streams."""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import Run
from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import (
    PREFIX,
    REPLY,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_extreme_cursors_on_an_ended_and_a_live_run(daphne_server_factory, users):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, PACE_TPS=60))
    sid = new_session_id()
    big = str(10**17)
    with httpx.Client(headers=users["a"][1], timeout=15) as client:
        live = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=2)
        assert live.status == 200
        # live run, cursor far ahead: the client claims sequences the stream never had (docs/transport.md, "Cursors")
        ahead = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": big})
        assert ahead.status == 409 and ahead.body["cause"] == "cursor_ahead"
        wait_idle(client, server, sid)
        run = Run.objects.get(session_id=sid)
        assert run.status == "completed"
        for cursor in ("0", str(run.start_sequence)):  # at or below the run's start: the run is replayed whole
            r = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": cursor})
            assert r.status == 200 and r.text == REPLY and r.done, (cursor, r.status)
        r = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": big})
        assert r.status == 409 and r.body["code"] == "state_not_resumable" and r.body["cause"] == "cursor_ahead"
        stream = server.url(f"{PREFIX}/sessions/{sid}/stream")
        r = read_sse(client, "GET", stream, headers={"Last-Event-ID": "0"})
        assert r.status == 200
        assert r.events[-1].event == "end", r.events[-1:]
        r = read_sse(client, "GET", stream, headers={"Last-Event-ID": big})
        assert r.status == 409 and r.body["cause"] == "cursor_ahead"
