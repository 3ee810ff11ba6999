"""A WebSocket handshake to a path helix does not serve is refused typed, never a 500.

Seen: ``ws/<prefix>sessions/<id>`` without its trailing slash (an easy slip: the HTTP routes
have none), or any other path on the WebSocket, answered the handshake with HTTP 500 and
logged Channels' ``ValueError: No route found for path``. Expected: the typed refusal of
every WebSocket connect (docs/transport.md: the error frame, then close ``4000 + status``):
``{"type": "error", "code": "not_found"}`` and close code 4404, as the HTTP routes answer
an unknown path under the prefix with 404 ``not_found``.
"""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.transport.conftest import PREFIX, new_session_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(
    "path", [f"/ws{PREFIX}/sessions/{{sid}}", f"/ws{PREFIX}/sessions/{{sid}}/more/", "/ws/elsewhere/"]
)
def test_a_websocket_to_an_unknown_path_gets_a_typed_not_found(shared_server, users, path):
    url = shared_server.ws_base_url + path.format(sid=new_session_id())
    with connect(url, additional_headers=users["a"][1]) as ws:
        frame = json.loads(ws.recv(timeout=5))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert frame == {"type": "error", "error": "Not found", "code": "not_found", "retryable": False}
    assert closed.value.rcvd.code == 4404
    assert "No route found" not in shared_server.log_text()
