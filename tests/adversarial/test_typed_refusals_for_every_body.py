"""Every refusal is typed JSON, for every content type and body, and writes nothing (issue 20).

Over real HTTP (daphne): multipart without a boundary (Twisted answered an empty 400
before any application code ran), form bodies, bytes that are not UTF-8, UTF-16 JSON,
a NUL in a string or a key (PostgreSQL answered a retryable 503 that could never
succeed; SQLite stored it), a number where a string goes (``{"id": 0}`` was accepted),
and a single-valued chat header given twice (the first copy won silently).
"""

from __future__ import annotations

import json

import httpx
import pytest

from helix_django.models import ChatSession, Message, Run
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]

JSON = "application/json"
FORMS = [
    ("multipart/form-data", b"--x\r\n"),
    ("multipart/form-data; boundary=x", b'--x\r\nContent-Disposition: form-data; name="id"\r\n\r\n1\r\n--x--\r\n'),
    ("application/x-www-form-urlencoded", b"id=1&title=2"),
    ("text/plain", b"hello"),
    (JSON, b'{"id": "\xff\xfe"}'),
    (JSON, '{"id": "x"}'.encode("utf-16")),
]


def nul_message(text="a\u0000b", metadata=None):
    message = user_message(text)
    if metadata is not None:
        message["metadata"] = metadata
    return message


def writes():
    return (ChatSession.objects.count(), Run.objects.count(), Message.objects.count())


def refused(response, *, field=None, cause=None):
    assert response.headers.get("content-type", "").startswith(JSON), (response.status_code, response.content[:100])
    body = response.json()
    assert_typed_refusal(response.status_code, body, statuses=(400, 404, 409, 415))
    assert body["retryable"] is False, body
    if cause is not None:
        assert (body["cause"], body.get("field")) == (cause, field), body
    return body


@pytest.fixture
def setup(shared_server, users):
    client = httpx.Client(headers=users["a"][1], timeout=20)
    sid = new_session_id()
    done = read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]))
    assert done.done
    run_id = Run.objects.get(session_id=sid).id
    yield shared_server, client, sid, run_id
    client.close()


def test_every_content_type_and_encoding_is_refused_typed_on_every_route(setup):
    server, client, sid, run_id = setup
    before = writes()
    urls = [
        chat_url(server, new_session_id()),
        chat_url(server, sid),
        server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results"),
    ]
    for url in urls:
        for content_type, body in FORMS:
            r = client.post(url, content=body, headers={"content-type": content_type})
            refused(r)
    for content_type, body in FORMS[:1] + FORMS[4:]:  # the bodies a session create cannot read
        refused(client.post(server.url(f"{PREFIX}/sessions/"), content=body, headers={"content-type": content_type}))
    assert writes() == before


def test_a_nul_is_refused_naming_its_field_on_every_database(setup):
    server, client, sid, run_id = setup
    before = writes()
    fresh = new_session_id()
    cases = [
        (chat_url(server, fresh), send_body(fresh, [nul_message()]), "messages.0.parts.0.text"),
        (chat_url(server, fresh), send_body(fresh, [nul_message("ok", {"k\u0000": 1})]), "messages.0.metadata.*"),
        (chat_url(server, sid), {"message": nul_message()}, "message.parts.0.text"),
        (
            server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/tool-results"),
            {"results": [{"toolCallId": "c1", "output": {"colour": ["ok", "\u0000"]}}]},
            "results.0.output.*.1",  # a key of its own is never echoed
        ),
    ]
    for url, body, field in cases:
        refused(client.post(url, json=body), cause="nul_character", field=field)
    r = client.post(server.url(f"{PREFIX}/sessions/"), json={"id": new_session_id(), "title": "a\u0000"})
    refused(r, cause="nul_character", field="title")
    # An escaped backslash before "u0000" is plain text: stored and sent back as it came.
    ok = read_sse(client, "POST", chat_url(server, fresh), json=send_body(fresh, [user_message("a\\u0000b")]))
    assert ok.done
    assert Message.objects.get(session_id=fresh, role="user").parts[0]["text"] == "a\\u0000b"
    assert writes()[0] == before[0] + 1


def test_session_fields_must_be_strings(setup):
    server, client, _sid, _run_id = setup
    before = writes()
    for body, field in [({"id": 0}, "id"), ({"title": 0}, "title"), ({"id": "ok_1", "title": ["x"]}, "title")]:
        assert refused(client.post(server.url(f"{PREFIX}/sessions/"), json=body))["fields"] == [field]
    assert writes() == before


def test_a_single_valued_chat_header_given_twice_is_refused(setup):
    server, client, sid, _run_id = setup
    before = writes()
    fresh = new_session_id()
    body = json.dumps(send_body(fresh, [user_message("hi")]))
    for name, values, method in [
        ("X-Helix-Request-Key", ("key-one-123", "key-two-456"), "POST"),
        ("X-Resume-From-Sequence", ("1", "2"), "GET"),
        ("Last-Event-ID", ("1", "1"), "GET"),
        ("X-Existing-Message-Id", ("m1", "m2"), "GET"),
        ("X-Helix-Replay-Prefix", ("1", "1"), "GET"),
    ]:
        headers = [("content-type", JSON), *((name, value) for value in values)]
        url = chat_url(server, fresh if method == "POST" else sid)
        r = client.request(method, url, content=body if method == "POST" else None, headers=headers)
        assert refused(r, cause="duplicate_header")["header"] == name.lower()
    assert writes() == before


def test_websocket_messages_are_bounded_and_a_nul_is_refused(setup, users):
    from websockets.sync.client import connect

    from tests.transport.test_stream_and_ws_live import cookie_of

    server, _client, sid, _run_id = setup
    before = writes()
    url = f"{server.ws_base_url}/ws{PREFIX}/sessions/{sid}/"
    big = json.dumps({"type": "send", "messages": [user_message("x" * 30_000)]})
    nul = json.dumps({"type": "send", "messages": [nul_message()]})
    with connect(url, additional_headers=cookie_of(users["a"][0])) as ws:
        ws.send(big)
        too_large = json.loads(ws.recv(timeout=10))
        ws.send(nul)
        refused_nul = json.loads(ws.recv(timeout=10))
    assert too_large == {
        "type": "error",
        "error": "Request body too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "request_body",
        "limitBytes": 20_000,  # the shared server's MAX_REQUEST_BYTES
        "sizeBytes": len(big),
    }
    assert (refused_nul["cause"], refused_nul["field"]) == ("nul_character", "messages.0.parts.0.text")
    assert writes() == before
