"""Session routes under hostile input: foreign ids, oversize titles, deletes of live or foreign sessions."""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import ChatSession
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_foreign_and_absurd_session_operations_are_typed_and_change_nothing(shared_server, users):
    sid = new_session_id()
    a = httpx.Client(headers=users["a"][1], timeout=15)
    b = httpx.Client(headers=users["b"][1], timeout=15)
    with a, b:
        assert a.post(shared_server.url(f"{PREFIX}/sessions/"), json={"id": sid, "title": "mine"}).status_code == 201
        r = b.post(shared_server.url(f"{PREFIX}/sessions/"), json={"id": sid, "title": "theirs"})
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
        for method in ("GET", "DELETE"):
            r = b.request(method, shared_server.url(f"{PREFIX}/sessions/{sid}/"))
            assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
        for path in (f"{sid}/snapshot", f"{sid}/runs/", f"{sid}/chat", f"{sid}/stream"):
            r = b.get(shared_server.url(f"{PREFIX}/sessions/{path}"))
            assert r.status_code == 404, (path, r.status_code)
        r = b.post(chat_url(shared_server, sid), json=send_body(sid, [user_message("hijack")]))
        assert_typed_refusal(r.status_code, r.json(), statuses=(404,))
        for body in ({"title": "t" * 5000}, {"id": "x" * 129}, {"id": ""}, {"id": ["a"]}, {"title": None}):
            r = a.post(shared_server.url(f"{PREFIX}/sessions/"), json=body)
            assert_typed_refusal(r.status_code, r.json(), statuses=(400,))
            assert "ttttt" not in r.text and "xxxxx" not in r.text
        for weird in ("%E2%98%83", "x" * 3000, "a%00b", "..", "%2e%2e"):
            r = a.get(shared_server.url(f"{PREFIX}/sessions/{weird}/snapshot"))
            assert r.status_code in (400, 404), (weird, r.status_code)
            if r.headers.get("content-type", "").startswith("application/json"):
                assert_typed_refusal(r.status_code, r.json(), statuses=(400, 404))
        session = ChatSession.objects.get(pk=sid)
        assert (session.owner_id, session.title) == (users["a"][0].pk, "mine")
        # a live run: the session cannot be deleted under it
        live = read_sse(
            a, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]), stop_after=1
        )
        assert live.status == 200
        r = a.delete(shared_server.url(f"{PREFIX}/sessions/{sid}/"))
        if r.status_code == 409:
            assert r.json()["code"] == "state_already_running"
            assert ChatSession.objects.filter(pk=sid).exists()
        else:
            assert r.status_code == 204  # the run had already ended
