"""Wire errors and bad input of the chat route over daphne: typed 4xx/5xx, nothing written, no 500."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from helix_django.models import ChatSession, Message, Run
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

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client(users):
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client


def nothing_written(session_id: str) -> bool:
    return not (
        ChatSession.objects.filter(pk=session_id).exists()
        or Message.objects.filter(session_id=session_id).exists()
        or Run.objects.filter(session_id=session_id).exists()
    )


def wait_status(client, server, sid, statuses=("ended", "failed")):
    for _ in range(300):
        snap = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
        if snap["status"] in statuses:
            return snap
        time.sleep(0.03)
    raise AssertionError("run did not finish")


def test_oversized_body_is_413_before_anything_is_read(shared_server, client):
    sid = new_session_id()
    big = send_body(sid, [user_message("x" * 30_000)])
    response = client.post(chat_url(shared_server, sid), json=big)
    assert response.status_code == 413
    size = int(response.request.headers["content-length"])
    assert response.json() == {
        "error": "Request body too large",
        "code": "validation_payload_too_large",
        "retryable": False,
        "cause": "request_body",
        "limitBytes": 20_000,
        "sizeBytes": size,
    }
    assert nothing_written(sid)


def test_oversized_chunked_body_is_413(shared_server, client):
    sid = new_session_id()
    payload = json.dumps(send_body(sid, [user_message("y" * 30_000)])).encode()

    def body():
        for i in range(0, len(payload), 4096):
            yield payload[i : i + 4096]

    response = client.post(chat_url(shared_server, sid), content=body(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["code"] == "validation_payload_too_large"
    assert response.json()["sizeBytes"] > 20_000
    assert nothing_written(sid)


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        (b"{not json", "json"),
        (b"[1, 2, 3]", "body"),
        (b'{"messages": "nope"}', "body"),
        (b'{"messages": [{"id": "m1", "role": "robot", "parts": []}]}', "body"),
        (b'{"messages": []}', "messages"),
        (json.dumps({f"junk{i}": i for i in range(200)}).encode(), "body"),
        (
            b'{"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}], "trigger": "x"}',
            "body",
        ),
        (b'{"id": "another-chat", "messages": [{"id": "m1", "role": "user", "parts": []}]}', "session_id_mismatch"),
    ],
)
def test_malformed_bodies_are_400_and_write_nothing(shared_server, client, content, cause):
    sid = new_session_id()
    response = client.post(chat_url(shared_server, sid), content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "validation_error" and body["cause"] == cause and body["retryable"] is False
    assert "robot" not in response.text and "junk1" not in response.text and "nope" not in response.text
    assert nothing_written(sid)


@pytest.mark.parametrize(
    ("headers", "cause"),
    [
        ({"X-Resume-From-Sequence": "abc"}, "cursor"),
        ({"X-Resume-From-Sequence": "-3"}, "cursor"),
        ({"Last-Event-ID": "1.5"}, "cursor"),
        ({"X-Helix-Replay-Prefix": "yes"}, "replay_prefix"),
        ({"X-Existing-Message-Id": "bad\x7fid"}, "message_id"),
    ],
)
def test_bad_resume_headers_are_400(shared_server, client, headers, cause):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]))
    response = client.get(chat_url(shared_server, sid), headers=headers)
    assert response.status_code == 400
    if shared_server.server == "uvicorn" and "\x7f" in "".join(headers.values()):
        # httptools refuses a DEL in a header value (not a field-vchar, RFC 9110 5.5) before any app runs.
        assert response.text == "Invalid HTTP request received."
        return
    assert response.json()["code"] == "validation_error" and response.json()["cause"] == cause


def test_bad_cursor_in_the_query_is_400(shared_server, client):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]))
    response = client.get(chat_url(shared_server, sid) + "?resumeFromSequence=x1")
    assert response.status_code == 400 and response.json()["cause"] == "cursor"


def test_malformed_request_key_is_400_and_not_echoed(shared_server, client):
    sid = new_session_id()
    key = "bad key with spaces"
    response = client.post(
        chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]), headers={"X-Helix-Request-Key": key}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "validation_error" and response.json()["cause"] == "request_key"
    assert key not in response.text
    assert nothing_written(sid)


def test_request_already_completed_is_409_with_the_run_id(shared_server, client):
    sid = new_session_id()
    first = user_message("one")
    key = {"X-Helix-Request-Key": "key-first-000001"}
    read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [first]), headers=key)
    wait_status(client, shared_server, sid)
    run_id = Run.objects.get(session_id=sid).id
    reply = Message.objects.get(session_id=sid, role="assistant").to_ui_message()
    read_sse(client, "POST", chat_url(shared_server, sid), json=send_body(sid, [first, reply, user_message("two")]))
    wait_status(client, shared_server, sid)
    again = client.post(chat_url(shared_server, sid), json=send_body(sid, [first]), headers=key)
    assert again.status_code == 409
    assert again.json()["code"] == "state_request_already_completed" and again.json()["runId"] == run_id
    assert Message.objects.filter(session_id=sid).count() == 4


def test_unknown_session_resume_is_404(shared_server, client):
    response = client.get(chat_url(shared_server, new_session_id()))
    assert response.status_code == 404
    assert response.json() == {"error": "Session not found", "code": "state_session_not_found", "retryable": False}


def test_invalid_session_id_is_400(shared_server, client):
    response = client.get(shared_server.url(f"{PREFIX}/sessions/{'x' * 200}/chat"))
    assert response.status_code == 400 and response.json()["cause"] == "session_id"


@pytest.mark.parametrize(
    ("route", "allowed"),
    [
        ("sessions/{sid}/chat", "GET, POST"),
        ("sessions/{sid}/stream", "GET"),
        ("chat", "POST"),
        ("chat/{sid}/stream", "GET"),
    ],
)
def test_other_methods_are_405_with_the_allowed_methods(shared_server, client, route, allowed):
    """Every streaming route's 405 names what it serves in ``Allow`` (RFC 9110 §15.5.6), the raw stream route's too."""
    for method in ("PUT", "DELETE", "PATCH"):
        url = shared_server.url(f"{PREFIX}/{route.format(sid=new_session_id())}")
        response = client.request(method, url, json={})
        assert response.status_code == 405, (route, method)
        assert response.json()["code"] == "validation_method_not_allowed"
        assert response.headers.get("allow") == allowed, (route, method)


def test_no_credentials_is_401(shared_server):
    sid = new_session_id()
    response = httpx.post(chat_url(shared_server, sid), json=send_body(sid, [user_message("hi")]))
    assert response.status_code == 401 and response.json()["code"] == "auth_not_authenticated"
    bad = httpx.get(chat_url(shared_server, sid), headers={"Authorization": "Token nope"})
    assert bad.status_code == 401 and bad.json()["code"] == "auth_failed"
    assert nothing_written(sid)


def test_a_failing_run_ends_the_send_with_one_typed_error_chunk(daphne_server_factory, client):
    server = daphne_server_factory(helix=agent_settings(TEXT=REPLY, FAIL_AFTER_CHUNKS=5, FAIL_RETRYABLE=True))
    sid = new_session_id()
    result = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    assert result.status == 200 and not result.done
    errors = [c for c in result.chunks if c["type"] == "error"]
    assert len(errors) == 1 and result.chunks[-1] == errors[0]
    assert result.events[-1].event == "error"
    body = json.loads(errors[0]["errorText"])
    assert body["code"] == "provider_error" and body["retryable"] is True
    assert "word" not in errors[0]["errorText"]  # no assistant text in the error
    # A resume with a cursor inside the failed run: 409 stream_failed with the run's classification.
    resumed = client.get(chat_url(server, sid), headers={"Last-Event-ID": result.events[2].id})
    assert resumed.status_code == 409
    assert resumed.json() == {
        "error": "stream_failed",
        "code": "provider_error",
        "retryable": True,
        "sessionId": sid,
        "streamId": sid,
        "message": "The stream failed",
        "errorDetail": {"code": "provider_error", "retryable": True, "cause": "scripted_failure"},
    }
    # Without a cursor the failed run is finished: nothing to resume.
    assert client.get(chat_url(server, sid)).status_code == 204


def test_run_not_live_is_503_with_retry_after(daphne_server_factory, client, users):
    from helix_django import store

    server = daphne_server_factory(helix={"LIVE_WAIT_TIMEOUT_MS": 400})
    sid = new_session_id()
    store.get_or_create_session(sid, owner_id=users["a"][0].pk)
    # A run in its start window that never claims the stream (its process is gone).
    store.start_run(store.RunStartRequest(session_id=sid, input_messages=[user_message("hi")]))
    started = time.monotonic()
    response = client.get(chat_url(server, sid), headers={"X-Resume-From-Sequence": "0"})
    assert time.monotonic() - started >= 0.4
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json() == {
        "error": "The run did not go live in time",
        "code": "transport_stream_drop",
        "retryable": True,
        "cause": "run_not_live",
    }
