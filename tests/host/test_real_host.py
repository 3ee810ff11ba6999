"""Every helix surface inside a "real host" (tests/host/settings.py): the host's rules apply, nothing breaks.

The site has a custom email user model, JWT + session auth with ``IsAuthenticated``,
django-cors-headers for a React app at another origin, ``ScopedRateThrottle`` and
``URLPathVersioning`` in its DRF defaults, ``ManifestStaticFilesStorage``, host routes after
helix's include and a strict ``ALLOWED_HOSTS``. Requests go through the same ASGI application
daphne serves (``tests.host.asgi``).
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from tests.host.conftest import HOST, ORIGIN, call, new_session_id, send_body

pytestmark = pytest.mark.django_db(transaction=True)

EVIL = (b"host", b"evil.example")
FROM_APP = (b"origin", ORIGIN.encode())
JSON = (b"content-type", b"application/json")


def routes(sid: str) -> list[tuple[str, str, bytes]]:
    base = f"/helix/api/sessions/{sid}"
    return [
        ("POST", f"{base}/chat", send_body(sid)),
        ("GET", f"{base}/chat", b""),
        ("GET", f"{base}/stream", b""),
        ("GET", f"{base}/snapshot", b""),
        ("GET", f"{base}/runs/", b""),
        ("GET", "/helix/api/sessions/", b""),
        ("GET", "/helix/api/schema/", b""),
        ("GET", "/admin/", b""),
    ]


async def test_a_disallowed_host_is_a_400_on_every_route(jwt_user):
    _user, auth = jwt_user
    sid = new_session_id()
    for method, path, body in routes(sid):
        status, _headers, _body = await call(method, path, [EVIL, auth, JSON], body)
        assert status == 400, (method, path)
    from tests.host.asgi import application

    socket = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[EVIL, FROM_APP, auth])
    connected, _code = await socket.connect()
    assert not connected


async def test_a_cross_origin_jwt_app_sends_resumes_streams_and_reads(jwt_user):
    _user, auth = jwt_user
    sid = new_session_id()
    chat = f"/helix/api/sessions/{sid}/chat"
    preflight = [
        HOST,
        FROM_APP,
        (b"access-control-request-method", b"POST"),
        (b"access-control-request-headers", b"authorization,content-type,x-helix-request-key"),
    ]
    status, headers, _body = await call("OPTIONS", chat, preflight)
    assert status == 200 and headers[b"access-control-allow-origin"] == ORIGIN.encode()
    assert b"x-helix-request-key" in headers[b"access-control-allow-headers"]

    status, headers, body = await call("POST", chat, [HOST, FROM_APP, auth, JSON], send_body(sid))
    assert status == 200, body
    assert headers[b"access-control-allow-origin"] == ORIGIN.encode()
    assert headers[b"x-frame-options"] == b"DENY"  # the host's clickjacking middleware ran
    assert headers[b"x-vercel-ai-ui-message-stream"] == b"v1"
    assert body.rstrip().endswith(b"data: [DONE]")

    status, headers, _body = await call("GET", chat, [HOST, FROM_APP, auth])
    assert status == 204 and headers[b"access-control-allow-origin"] == ORIGIN.encode()
    status, headers, body = await call("GET", f"/helix/api/sessions/{sid}/stream", [HOST, FROM_APP, auth])
    assert status == 200 and b"event: end" in body
    assert headers[b"access-control-allow-origin"] == ORIGIN.encode()

    status, _headers, body = await call("GET", f"/helix/api/sessions/{sid}/snapshot", [HOST, FROM_APP, auth])
    assert status == 200 and [m["role"] for m in json.loads(body)["messages"]] == ["user", "assistant"]
    status, _headers, body = await call("GET", "/helix/api/sessions/", [HOST, auth])
    assert status == 200 and [s["id"] for s in json.loads(body)["results"]] == [sid]  # the host's pagination
    status, _headers, body = await call("GET", f"/helix/api/sessions/{sid}/runs/", [HOST, auth])
    assert status == 200 and json.loads(body)["results"][0]["status"] == "completed"


async def test_the_hosts_permission_and_refusals_carry_its_cors_headers(jwt_user):
    sid = new_session_id()
    status, headers, body = await call("GET", f"/helix/api/sessions/{sid}/chat", [HOST, FROM_APP])
    assert status == 401 and json.loads(body)["code"] == "auth_not_authenticated"
    assert headers[b"access-control-allow-origin"] == ORIGIN.encode()
    status, _headers, body = await call("GET", "/helix/api/sessions/", [HOST])
    assert status == 401 and json.loads(body)["code"] == "auth_not_authenticated"
    bad_jwt = (b"authorization", b"Bearer not-a-jwt")
    status, _headers, body = await call(
        "POST", f"/helix/api/sessions/{sid}/chat", [HOST, bad_jwt, JSON], send_body(sid)
    )
    assert status == 401 and json.loads(body)["code"] == "auth_failed"


async def test_a_session_cookie_send_needs_the_csrf_token(jwt_user):
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    user, _auth = jwt_user
    client = Client()
    await sync_to_async(client.force_login)(user)
    secret = _get_new_csrf_string()
    cookie = f"sessionid={client.cookies['sessionid'].value}; csrftoken={secret}".encode()
    sid = new_session_id()
    chat = f"/helix/api/sessions/{sid}/chat"
    status, _headers, body = await call("POST", chat, [HOST, (b"cookie", cookie), JSON], send_body(sid))
    assert status == 403 and json.loads(body)["cause"] == "csrf"
    with_token = [HOST, (b"cookie", cookie), (b"x-csrftoken", secret.encode()), JSON]
    status, _headers, body = await call("POST", chat, with_token, send_body(sid))
    assert status == 200 and body.rstrip().endswith(b"data: [DONE]")


async def test_the_websocket_serves_a_jwt_app_from_the_cors_origin(jwt_user):
    from tests.host.asgi import application

    _user, auth = jwt_user
    sid = new_session_id()
    status, _headers, _body = await call("POST", f"/helix/api/sessions/{sid}/chat", [HOST, auth, JSON], send_body(sid))
    assert status == 200
    socket = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[HOST, FROM_APP, auth])
    connected, _code = await socket.connect()
    assert connected
    await socket.send_json_to({"type": "resume", "from_sequence": 0})
    frames = []
    while not frames or frames[-1]["type"] == "chunk":
        frames.append(await socket.receive_json_from(timeout=10))
    await socket.disconnect()
    assert frames[-1]["type"] == "end" and frames[0]["type"] == "chunk" and len(frames) > 2
    anonymous = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[HOST, FROM_APP])
    connected, _code = await anonymous.connect()
    assert connected
    assert (await anonymous.receive_json_from(timeout=5))["code"] == "auth_not_authenticated"
    await anonymous.disconnect()


async def test_the_websocket_serves_a_client_that_sends_no_origin_and_refuses_a_foreign_one(jwt_user):
    """A script or mobile app sends no ``Origin`` (found by a new user, seventeenth session: a bare 403).

    Browsers always send one, so a cross-site page is still refused; without one the
    handshake authenticates like any API client (here a JWT).
    """
    from tests.host.asgi import application

    _user, auth = jwt_user
    sid = new_session_id()
    status, _headers, _body = await call("POST", f"/helix/api/sessions/{sid}/chat", [HOST, auth, JSON], send_body(sid))
    assert status == 200
    script = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[HOST, auth])
    connected, _code = await script.connect()
    assert connected
    await script.send_json_to({"type": "resume", "from_sequence": 0})
    frames = []
    while not frames or frames[-1]["type"] == "chunk":
        frames.append(await script.receive_json_from(timeout=10))
    await script.disconnect()
    assert frames[-1]["type"] == "end" and len(frames) > 2
    foreign = (b"origin", b"http://evil.example")
    page = WebsocketCommunicator(application, f"/ws/helix/api/sessions/{sid}/", headers=[HOST, foreign, auth])
    connected, _code = await page.connect()
    assert not connected


async def test_host_routes_after_the_include_and_its_versioned_api_still_answer(jwt_user):
    _user, auth = jwt_user
    status, _headers, body = await call("GET", "/helix/api/host-status/", [HOST])
    assert (status, json.loads(body)) == (200, {"host": "ok"})
    status, _headers, body = await call("GET", "/api/v2/reports/", [HOST, auth])
    assert (status, json.loads(body)) == (200, {"version": "v2"})
    status, _headers, body = await call("GET", "/helix/api/sessions/x/nope", [HOST, auth])
    assert (status, json.loads(body)["code"]) == (404, "not_found")
