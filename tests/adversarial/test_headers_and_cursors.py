"""Cursors, ids and headers of every shape on the chat and stream routes; Content-Length lies; odd methods."""

from __future__ import annotations

import json

import pytest

from helix_django.models import ChatSession, Run
from tests.adversarial.conftest import assert_typed_refusal, httptools_refuses, protocol_refusal, raw_request
from tests.transport.conftest import PREFIX, new_session_id

pytestmark = [pytest.mark.django_db(transaction=True)]

HI_BODY = b'{"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}'
BAD_CURSORS = [b"-1", b"1.5", b"1e3", b"abc", b"0x10", b"9" * 40, b"\xb2", b"\xb9\xb3", b"1\x00", b"+5", b" ", b"\xa0"]


def _owned_session(users) -> str:
    from helix_django.store import get_or_create_session

    sid = new_session_id()
    get_or_create_session(sid, owner_id=users["a"][0].pk, anonymous_key="")
    return sid


def _head(method: bytes, path: str | bytes, token_headers: dict[str, str]) -> bytes:
    """Return the request line, ``Host`` and credential headers of a raw HTTP/1.1 request (more headers follow)."""
    auth = "".join(f"{k}: {v}\r\n" for k, v in token_headers.items()).encode()
    path = path if isinstance(path, bytes) else path.encode()
    return method + b" " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth


def _get(server, path: bytes, token_headers: dict[str, str], extra: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    return raw_request(server.port, _head(b"GET", path, token_headers) + extra + b"Connection: close\r\n\r\n")


@pytest.mark.parametrize("route", [b"chat", b"stream"])
def test_bad_cursor_headers_are_typed_400s(shared_server, users, route):
    sid = _owned_session(users)
    path = f"{PREFIX}/sessions/{sid}/".encode() + route
    for header_name in (b"X-Resume-From-Sequence", b"Last-Event-ID"):
        for cursor in BAD_CURSORS:
            status, _, body = _get(shared_server, path, users["a"][1], header_name + b": " + cursor + b"\r\n")
            if cursor.strip(b" \xa0") == b"" and status in (204, 404):
                continue  # a blank cursor is no cursor
            if b"\x00" in cursor:
                assert (status, body) == protocol_refusal(shared_server)  # refused before the app runs
                continue
            assert_typed_refusal(status, json.loads(body), statuses=(400,))
            assert json.loads(body)["cause"] in ("cursor", "header"), (header_name, cursor)


def test_bad_cursor_query_is_a_typed_400(shared_server, users):
    sid = _owned_session(users)
    for query in (b"-1", b"%C2%B2", b"1.0", b"%00", b"99999999999999999999999", b"%FF"):
        path = f"{PREFIX}/sessions/{sid}/chat?resumeFromSequence=".encode() + query
        status, _, body = _get(shared_server, path, users["a"][1])
        assert_typed_refusal(status, json.loads(body), statuses=(400,))


def test_absurd_existing_message_ids_never_500(shared_server, users):
    for value in [b"\x01ctl", b"x" * 200, b"\xff\xfe", b"a\tb", b"\xc3\xa9t\xc3\xa9", b"\x7f"]:
        _check_existing_message_id(shared_server, users, value)


def _check_existing_message_id(shared_server, users, value):
    sid = _owned_session(users)
    path = f"{PREFIX}/sessions/{sid}/chat".encode()
    extra = b"X-Existing-Message-Id: " + value + b"\r\nX-Helix-Replay-Prefix: 1\r\n"
    status, _, body = _get(shared_server, path, users["a"][1], extra)
    if shared_server.server == "uvicorn" and httptools_refuses(value):
        assert (status, body) == protocol_refusal(shared_server)  # refused before the app runs
        return
    assert status in (204, 400, 409), (status, body)
    if status != 204:
        assert_typed_refusal(status, json.loads(body))
        assert value not in body


def test_bad_request_keys_are_typed_400s_and_write_nothing(shared_server, users):
    for key in [b"short", b"k" * 129, b"bad key!!", b"\xe2\x98\x83" * 4, b"key\x00key\x00key"]:
        _check_request_key(shared_server, users, key)


def _check_request_key(shared_server, users, key):
    sid = new_session_id()
    data = (
        _head(b"POST", f"{PREFIX}/sessions/{sid}/chat", users["a"][1])
        + b"X-Helix-Request-Key: "
        + key
        + b"\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(HI_BODY)}\r\nConnection: close\r\n\r\n".encode()
        + HI_BODY
    )
    status, _, resp = raw_request(shared_server.port, data)
    if b"\x00" in key:
        assert (status, resp) == protocol_refusal(shared_server)  # refused before the app runs
    else:
        assert_typed_refusal(status, json.loads(resp), statuses=(400,))
        assert json.loads(resp)["cause"] == "request_key"
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_malformed_content_length_never_500(shared_server, users):
    for length in [b"\xb2", b"\xb9\xb3", b"-5", b"abc"]:
        _check_content_length(shared_server, users, length)


def _check_content_length(shared_server, users, length):
    sid = new_session_id()
    data = (
        _head(b"POST", f"{PREFIX}/sessions/{sid}/chat", users["a"][1])
        + b"Content-Type: application/json\r\nContent-Length: "
        + length
        + b"\r\nConnection: close\r\n\r\n{}"
    )
    status, _, resp = raw_request(shared_server.port, data, timeout=3)
    assert status == 400, (status, resp)
    if resp != protocol_refusal(shared_server)[1]:  # daphne's own refusal is empty, uvicorn's plain text
        assert_typed_refusal(status, json.loads(resp), statuses=(400,))
    assert not ChatSession.objects.filter(pk=sid).exists()


def _hi_declaring(sid: str, headers: dict, length: int) -> bytes:
    """A raw chat POST of HI_BODY whose Content-Length header says ``length``."""
    head = _head(b"POST", f"{PREFIX}/sessions/{sid}/chat", headers) + b"Content-Type: application/json\r\n"
    return head + f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode() + HI_BODY


def test_content_length_larger_than_body_then_gone_writes_nothing(shared_server, users):
    """Daphne (twisted) waits for the declared body; a client that leaves writes nothing and breaks nothing."""
    sid = new_session_id()
    data = _hi_declaring(sid, users["a"][1], len(HI_BODY) + 500)
    with pytest.raises(TimeoutError):
        raw_request(shared_server.port, data, timeout=1)
    status, _, _ = _get(shared_server, f"{PREFIX}/sessions/".encode(), users["a"][1])
    assert status == 200
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_content_length_smaller_than_body_is_a_typed_400(shared_server, users):
    sid = new_session_id()
    data = _hi_declaring(sid, users["a"][1], len(HI_BODY) - 10)
    status, _, resp = raw_request(shared_server.port, data)
    assert_typed_refusal(status, json.loads(resp), statuses=(400,))
    assert not ChatSession.objects.filter(pk=sid).exists()


def test_chunked_body_over_the_limit_is_413(shared_server, users):
    sid = new_session_id()
    chunk = b"x" * 8000
    chunks = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(4)) + b"0\r\n\r\n"
    data = (
        _head(b"POST", f"{PREFIX}/sessions/{sid}/chat", users["a"][1])
        + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        + chunks
    )
    status, _, resp = raw_request(shared_server.port, data)
    assert_typed_refusal(status, json.loads(resp), statuses=(413,))
    assert not ChatSession.objects.filter(pk=sid).exists()


@pytest.mark.parametrize("route", [b"chat", b"stream", b"snapshot"])
def test_unknown_methods_are_405(shared_server, users, route):
    sid = _owned_session(users)
    for method in (b"PUT", b"PATCH", b"DELETE", b"OPTIONS", b"FOO", b"HEAD"):
        _check_method(shared_server, users, sid, method, route)


def _check_method(shared_server, users, sid, method, route):
    data = (
        _head(method, f"{PREFIX}/sessions/{sid}/".encode() + route, users["a"][1])
        + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    status, _, resp = raw_request(shared_server.port, data)
    if method == b"FOO" and shared_server.server == "uvicorn":
        assert (status, resp) == protocol_refusal(shared_server)  # httptools knows only registered methods
        return
    if method == b"HEAD":
        assert status in (200, 204, 405), status
        return
    if method == b"OPTIONS" and route == b"snapshot":
        assert status == 200  # DRF's metadata answer
        return
    assert_typed_refusal(status, json.loads(resp), statuses=(405,))


def test_get_with_a_body_is_a_resume_and_sends_nothing(shared_server, users):
    sid = _owned_session(users)
    data = (
        _head(b"GET", f"{PREFIX}/sessions/{sid}/chat", users["a"][1])
        + f"Content-Length: {len(HI_BODY)}\r\nConnection: close\r\n\r\n".encode()
        + HI_BODY
    )
    status, _, _ = raw_request(shared_server.port, data)
    assert status == 204
    assert not Run.objects.filter(session_id=sid).exists()
