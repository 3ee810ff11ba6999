"""An anonymous caller gets helix's typed 401 whatever the host's DRF settings, on every route.

Found by a new user (seventeenth session): with DRF's documented ``UNAUTHENTICATED_USER: None``
(``request.user`` is None, not an AnonymousUser), an anonymous request to the chat route, the
AI SDK route or the WebSocket was a 500 (``None.is_authenticated``); the REST routes gave 401.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.test import override_settings

from tests.transport.conftest import new_session_id, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]

JSON = [(b"content-type", b"application/json")]


@pytest.fixture
def no_unauthenticated_user(settings):
    rest = dict(getattr(settings, "REST_FRAMEWORK", {}) or {})
    with override_settings(REST_FRAMEWORK={**rest, "UNAUTHENTICATED_USER": None}):
        yield


@pytest.mark.parametrize(
    ("method", "route"),
    [
        ("GET", "sessions/{sid}/chat"),
        ("POST", "sessions/{sid}/chat"),
        ("POST", "chat"),
        ("GET", "sessions/{sid}/stream"),
    ],
    ids=["resume", "send", "ai-sdk-send", "raw-stream"],
)
async def test_the_streaming_routes_answer_401(no_unauthenticated_user, method, route):
    from tests.asgi import application

    sid = new_session_id()
    body = json.dumps(send_body(sid, [user_message("hi")])).encode() if method == "POST" else b""
    path = "/helix/api/" + route.format(sid=sid)
    response = await HttpCommunicator(application, method, path, body=body, headers=JSON).get_response(timeout=10)
    assert response["status"] == 401, response["body"][:300]
    assert json.loads(response["body"])["code"] == "auth_not_authenticated"


async def test_the_rest_routes_answer_401(no_unauthenticated_user):
    from tests.asgi import application

    response = await HttpCommunicator(application, "GET", "/helix/api/sessions/").get_response(timeout=10)
    assert response["status"] == 401
    assert json.loads(response["body"])["code"] == "auth_not_authenticated"


async def test_the_websocket_refuses_with_its_typed_close(no_unauthenticated_user):
    from tests.asgi import application

    socket = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{new_session_id()}/")
    connected, _ = await socket.connect()
    assert connected  # accepted, then refused typed: a frame and close 4000 + status
    frame = await socket.receive_json_from(timeout=10)
    assert (frame["type"], frame["code"]) == ("error", "auth_not_authenticated")
    assert (await socket.receive_output(10)) == {"type": "websocket.close", "code": 4401}
