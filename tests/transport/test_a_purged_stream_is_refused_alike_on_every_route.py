"""A stream whose chunks were purged (retention) is refused alike on every route, whatever its run's ending.

Seen: after a purge, the raw stream route and the WebSocket ended the purged stream with
``end {status: "completed"}``, even for a failed run, while the chat route refused it as
409 ``state_not_resumable`` (``cause: "stream_expired"``). The snapshot still holds the
conversation; every route now says so the same way.
"""

from __future__ import annotations

import json

import httpx
import pytest
from asgiref.sync import async_to_sync
from websockets.sync.client import connect

from helix_django.models import ChatSession
from helix_django.streams import get_stream_manager
from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, read_sse, send_body, user_message
from tests.transport.test_stream_and_ws_live import cookie_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXPIRED = ("state_not_resumable", "stream_expired")


@pytest.mark.parametrize("ending", ["failed", "completed"])
def test_every_route_refuses_a_purged_stream_as_expired(daphne_server_factory, users, ending):
    options = {"TEXT": "an answer that will be purged", "PACE_TPS": 0}
    if ending == "failed":
        options.update(FAIL_AFTER_CHUNKS=2)
    server = daphne_server_factory(helix=agent_settings(**options))
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
        assert wait_idle(client, server, sid)["status"] == ("failed" if ending == "failed" else "ended")
        async_to_sync(get_stream_manager().purge_stream)(ChatSession.objects.get(pk=sid).stream_id)

        raw = client.get(server.url(f"{PREFIX}/sessions/{sid}/stream"), params={"resumeFromSequence": "0"})
        chat = client.get(chat_url(server, sid), headers={"X-Resume-From-Sequence": "0"})
        for response in (raw, chat):
            assert response.status_code == 409, (response.request.url, response.text)
            assert (response.json()["code"], response.json()["cause"]) == EXPIRED
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    with connect(url, additional_headers=cookie_of(users["a"][0]), max_size=None) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        frame = json.loads(ws.recv(timeout=10))
        assert (frame["type"], frame["code"], frame["cause"]) == ("error", *EXPIRED), frame
