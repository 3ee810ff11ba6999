"""Malformed input on every HTTP route over daphne: a typed 4xx JSON body, never a 500, nothing written."""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import ChatSession, Message, Run
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, chat_url, new_session_id

pytestmark = [pytest.mark.django_db(transaction=True)]

DEEP = b"[" * 100_00 + b"]" * 100_00  # 20 000 bytes: deeper than Python's recursion limit, under MAX_REQUEST_BYTES
DEEP_OBJ = b'{"a":' * 3000 + b"1" + b"}" * 3000


def nothing_written(session_id: str) -> bool:
    return not (
        ChatSession.objects.filter(pk=session_id).exists()
        or Message.objects.filter(session_id=session_id).exists()
        or Run.objects.filter(session_id=session_id).exists()
    )


@pytest.fixture
def client(users):
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client


BAD_CHAT_BODIES = [
    b"{",
    b"\xff\xfe\x00",
    b"null",
    b"[]",
    b"42",
    b'"text"',
    DEEP[:19_000],
    DEEP_OBJ,
    b'{"messages": "nope"}',
    b'{"messages": [1, 2]}',
    b'{"messages": [{"id": 1, "role": "user", "parts": []}]}',
    b'{"messages": [{"id": "u1", "role": "wizard", "parts": []}]}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": "x"}]}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": 5}]}]}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": [{}]}]}',
    b'{"messages": [{"id": "", "role": "user", "parts": []}]}',
    b'{"messages": [], "trigger": "explode"}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": []}], "trigger": 7}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": []}], "messageId": {"a": 1}}',
    b'{"messages": [{"id": "u1", "role": "system", "parts": []}]}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": [], "metadata": 3}]}',
    b'{"message": null}',
    b'{"id": 5, "messages": [{"id": "u1", "role": "user", "parts": []}]}',
    b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "\\ud800"}]}]}',
    b"NaN",
    b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "x"}]}], "trigger": NaN}',
]


def test_malformed_chat_bodies_are_typed_400s(shared_server, client):
    for body in BAD_CHAT_BODIES:
        sid = new_session_id()
        r = client.post(chat_url(shared_server, sid), content=body, headers={"content-type": "application/json"})
        assert_typed_refusal(r.status_code, r.json(), statuses=(400,))
        assert nothing_written(sid), body[:80]


def _drf_routes(sid: str) -> list[tuple[str, str]]:
    return [
        ("POST", f"{PREFIX}/sessions/"),
        ("POST", f"{PREFIX}/sessions/{sid}/runs/run_x/tool-results"),
        ("POST", f"{PREFIX}/sessions/{sid}/runs/run_x/cancel"),
    ]


BAD_DRF_BODIES = [
    b"{",
    b"\xff\xfe",
    DEEP[:19_000],
    DEEP_OBJ,
    b"[]",
    b"null",
    b'{"id": 5}',
    b'{"id": "a b"}',
    b'{"id": "\\u0000"}',
    b'{"title": {"x": 1}}',
    b'{"results": "x"}',
    b'{"results": [{"toolCallId": 1}]}',
    b'{"id": "ok_id", "title": "\\ud800"}',
    b'{"results": [{"toolCallId": "c", "output": "\\udfff"}]}',
]


def test_malformed_drf_bodies_are_typed_4xx(shared_server, client, users):
    for body in BAD_DRF_BODIES:
        _check_drf_body(shared_server, client, users, body)


def _check_drf_body(shared_server, client, users, body):
    from helix_django.store import get_or_create_session

    sid = new_session_id()
    get_or_create_session(sid, owner_id=users["a"][0].pk, anonymous_key="")
    for method, path in _drf_routes(sid):
        r = client.request(method, shared_server.url(path), content=body, headers={"content-type": "application/json"})
        if r.status_code in (200, 201):
            continue
        assert_typed_refusal(r.status_code, r.json())
    assert not ChatSession.objects.filter(pk="ok_id").exists()
    assert not Run.objects.filter(session_id=sid).exists()
