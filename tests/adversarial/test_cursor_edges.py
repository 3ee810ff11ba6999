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
        # live run, cursor far ahead: nothing after it exists; the response must end with the run, not hang
        ahead = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": big})
        assert ahead.status in (200, 204)
        assert [e for e in ahead.events if e.id] == []
        wait_idle(client, server, sid)
        run = Run.objects.get(session_id=sid)
        assert run.status == "completed"
        for cursor in ("0", big, str(run.start_sequence)):
            r = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": cursor})
            if cursor == str(run.start_sequence):
                assert r.status == 200 and r.text == REPLY and r.done
            else:
                assert r.status == 204, (cursor, r.status)
        stream = server.url(f"{PREFIX}/sessions/{sid}/stream")
        for cursor in ("0", big):
            r = read_sse(client, "GET", stream, headers={"Last-Event-ID": cursor})
            assert r.status == 200
            assert r.events[-1].event == "end", r.events[-1:]
            assert all(int(e.id) > int(cursor) for e in r.events if e.id)
