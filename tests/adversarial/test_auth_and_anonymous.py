"""Credentials of every shape, CSRF, and anonymous visitors: typed 401/403/404, nothing written for a refusal."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.sessions.models import Session as DjangoSession

from helix_django.models import ChatSession
from tests.adversarial.conftest import assert_typed_refusal, raw_request
from tests.transport.conftest import PREFIX, agent_settings, chat_url, new_session_id, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]

BAD_AUTH = [
    b"Token ",
    b"Token nope",
    b"Token " + b"a" * 5000,
    b"Token \xff\xfe\xfd",
    b"Token a b c",
    b"Bearer xyz",
    b"Basic Zm9vOmJhcg==",
    b"\xe2\x98\x83",
]


def test_bad_credentials_on_every_route_are_typed_401s(shared_server):
    sid = new_session_id()
    routes = [
        (b"GET", f"{PREFIX}/sessions/{sid}/chat"),
        (b"POST", f"{PREFIX}/sessions/{sid}/chat"),
        (b"GET", f"{PREFIX}/sessions/{sid}/stream"),
        (b"GET", f"{PREFIX}/sessions/{sid}/snapshot"),
        (b"GET", f"{PREFIX}/sessions/"),
        (b"POST", f"{PREFIX}/sessions/{sid}/runs/r1/cancel"),
    ]
    body = b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}'
    for value in [None, *BAD_AUTH]:
        for method, path in routes:
            auth = b"" if value is None else b"Authorization: " + value + b"\r\n"
            data = (
                method
                + b" "
                + path.encode()
                + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + auth
                + b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            status, _, resp = raw_request(shared_server.port, data)
            import json

            # Basic/Bearer schemes are not ours: DRF ignores them (no credentials, 401 not authenticated)
            assert_typed_refusal(status, json.loads(resp), statuses=(401, 403))
            assert b"nope" not in resp and b"aaaa" not in resp
    assert not ChatSession.objects.filter(pk=sid).exists()


@pytest.fixture
def anon_server(daphne_server_factory):
    return daphne_server_factory(helix={**agent_settings(TEXT="Hello there.", PACE_TPS=500), "ALLOW_ANONYMOUS": True})


def test_a_refused_anonymous_first_post_writes_nothing(anon_server):
    sid = new_session_id()
    before = DjangoSession.objects.count()
    with httpx.Client(timeout=10) as client:
        r = client.post(chat_url(anon_server, sid), content=b"{broken", headers={"content-type": "application/json"})
        assert_typed_refusal(r.status_code, r.json(), statuses=(400,))
        assert "set-cookie" not in r.headers
    assert DjangoSession.objects.count() == before
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_anonymous_cookie_owner_needs_csrf_and_cannot_reach_others(anon_server, users):
    sid = new_session_id()
    with httpx.Client(timeout=10) as client:
        r = client.post(chat_url(anon_server, sid), json=send_body(sid, [user_message("hi")]))
        assert r.status_code == 200  # the first send creates the visitor's Django session
        assert client.cookies.get("sessionid")
        # with its cookie, an unsafe request now needs the CSRF token
        sid2 = new_session_id()
        r = client.post(chat_url(anon_server, sid2), json=send_body(sid2, [user_message("hi")]))
        assert_typed_refusal(r.status_code, r.json(), statuses=(403,))
        assert r.json()["cause"] == "csrf"
        assert not ChatSession.objects.filter(pk=sid2).exists()
        r = client.post(anon_server.url(f"{PREFIX}/sessions/"), json={"id": sid2})
        assert_typed_refusal(r.status_code, r.json(), statuses=(403,))
        assert not ChatSession.objects.filter(pk=sid2).exists()
    with httpx.Client(timeout=10) as stranger:  # another anonymous visitor: the session does not exist for it
        for path in (
            f"{PREFIX}/sessions/{sid}/snapshot",
            f"{PREFIX}/sessions/{sid}/chat",
            f"{PREFIX}/sessions/{sid}/runs/",
        ):
            r = stranger.get(anon_server.url(path))
            if r.status_code == 401:
                continue  # no Django session yet: not authenticated
            assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
    with httpx.Client(headers=users["b"][1], timeout=10) as other_user:
        r = other_user.get(anon_server.url(f"{PREFIX}/sessions/{sid}/snapshot"))
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
