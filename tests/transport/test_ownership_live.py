"""Ownership over daphne: user B gets 404 on user A's session on every route, SSE and WebSocket included."""

from __future__ import annotations

import json

import httpx
import pytest
from django.conf import settings
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from helix_django.models import ChatSession, Message, Run
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def ws_url(server, session_id: str) -> str:
    return f"{server.ws_base_url}/ws{PREFIX}/sessions/{session_id}/"


@pytest.fixture
def owned(shared_server, users):
    """A session of user A with one finished run."""
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=10) as a:
        result = read_sse(a, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("secret plan")]))
    assert result.done
    return sid, Run.objects.get(session_id=sid)


def test_user_b_gets_404_on_every_http_route(shared_server, users, owned):
    sid, run = owned
    before = (Message.objects.filter(session_id=sid).count(), Run.objects.filter(session_id=sid).count())
    not_found = {"error": "Session not found", "code": "state_session_not_found", "retryable": False}
    with httpx.Client(headers=users["b"][1], timeout=10) as b:
        assert b.get(chat_url(shared_server, sid)).json() == not_found
        assert b.get(chat_url(shared_server, sid), headers={"Last-Event-ID": "1"}).status_code == 404
        send = b.post(chat_url(shared_server, sid), json=send_body(sid, [user_message("hijack")]))
        assert send.status_code == 404 and send.json() == not_found
        stream = b.get(shared_server.url(f"{PREFIX}/sessions/{sid}/stream"))
        assert stream.status_code == 404 and stream.json()["error"] == "Stream not found"
        for method, path in [
            ("GET", f"sessions/{sid}/"),
            ("DELETE", f"sessions/{sid}/"),
            ("GET", f"sessions/{sid}/snapshot"),
            ("GET", f"sessions/{sid}/runs/"),
            ("POST", f"sessions/{sid}/runs/{run.id}/cancel"),
            ("POST", f"sessions/{sid}/runs/{run.id}/tool-results"),
        ]:
            response = b.request(method, shared_server.url(f"{PREFIX}/{path}"), json={"results": []})
            assert response.status_code == 404, (method, path)
            assert response.json() == not_found
            assert "secret plan" not in response.text
    assert (Message.objects.filter(session_id=sid).count(), Run.objects.filter(session_id=sid).count()) == before
    assert ChatSession.objects.get(pk=sid).owner_id == users["a"][0].pk


def test_user_b_gets_404_on_the_websocket(shared_server, users, owned):
    sid, _run = owned
    with connect(ws_url(shared_server, sid), additional_headers={"Cookie": session_cookie(users["b"][0])}) as ws:
        frame = json.loads(ws.recv(timeout=5))
        assert frame == {
            "type": "error",
            "error": "Session not found",
            "code": "state_session_not_found",
            "retryable": False,
        }
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 4404


def test_the_owner_reads_the_websocket(shared_server, users, owned):
    sid, _run = owned
    with connect(ws_url(shared_server, sid), additional_headers={"Cookie": session_cookie(users["a"][0])}) as ws:
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        frames = []
        while True:
            frame = json.loads(ws.recv(timeout=5))
            frames.append(frame)
            if frame["type"] in ("end", "fail", "error"):
                break
    assert frames[-1] == {"type": "end", "status": "completed"}
    assert frames[0]["type"] == "chunk" and frames[0]["chunk"]["type"] == "start"


def test_anonymous_chat_belongs_to_the_django_session(daphne_server_factory):
    from tests.transport.conftest import REPLY, agent_settings

    server = daphne_server_factory(helix={**agent_settings(TEXT=REPLY), "ALLOW_ANONYMOUS": True})
    sid = new_session_id()
    with httpx.Client(timeout=10) as visitor:
        sent = read_sse(visitor, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
        assert sent.done
        assert settings.SESSION_COOKIE_NAME in visitor.cookies  # the new anonymous session's cookie
        assert visitor.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).status_code == 200
    session = ChatSession.objects.get(pk=sid)
    assert session.owner_id is None and session.anonymous_key
    with httpx.Client(timeout=10) as stranger:
        assert stranger.get(chat_url(server, sid)).status_code == 401  # no Django session at all
        other = new_session_id()
        read_sse(stranger, "POST", chat_url(server, other), json=send_body(other, [user_message("hey")]))
        assert stranger.get(chat_url(server, sid)).status_code == 404
        assert stranger.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).status_code == 404


def test_session_auth_posts_to_the_chat_route_need_the_csrf_token(shared_server, users):
    from django.middleware.csrf import _get_new_csrf_string

    sid = new_session_id()
    cookie = session_cookie(users["a"][0])
    with httpx.Client(timeout=10) as browser:
        refused = browser.post(
            chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]), headers={"Cookie": cookie}
        )
        assert refused.status_code == 403
        assert refused.json() == {
            "error": "CSRF check failed",
            "code": "auth_permission_denied",
            "retryable": False,
            "cause": "csrf",
        }
        assert not ChatSession.objects.filter(pk=sid).exists()
        token = _get_new_csrf_string()
        sent = read_sse(
            browser,
            "POST",
            chat_url(shared_server, sid),
            json=send_body(sid, [user_message("hi")]),
            headers={"Cookie": f"{cookie}; csrftoken={token}", "X-CSRFToken": token},
        )
        assert sent.status == 200 and sent.done
        # A resume is a safe GET: the session cookie alone is enough.
        assert browser.get(chat_url(shared_server, sid), headers={"Cookie": cookie}).status_code in (200, 204)
