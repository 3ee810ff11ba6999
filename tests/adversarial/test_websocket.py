"""The WebSocket under garbage: every bad frame answers one typed error frame and the socket stays usable."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect

from tests.transport.conftest import PREFIX, REPLY, new_session_id, user_message
from tests.transport.test_stream_and_ws_live import cookie_of, text_of, ws_frames

pytestmark = [pytest.mark.django_db(transaction=True)]

GARBAGE = [
    "{not json",
    "",
    "[" * 5000 + "]" * 5000,  # deeper than the interpreter's recursion limit
    '{"a":' * 3000 + "1" + "}" * 3000,
    "null",
    "[]",
    "42",
    '"resume"',
    '{"type": null}',
    '{"type": ["resume"]}',
    '{"type": "resume", "from_sequence": -1}',
    '{"type": "resume", "from_sequence": 1.5}',
    '{"type": "resume", "from_sequence": true}',
    '{"type": "resume", "from_sequence": 1000000000000000000000000000000}',
    '{"type": "resume", "from_sequence": "\\u00b2"}',
    '{"type": "resume", "from_sequence": {"a": 1}}',
    '{"type": "send"}',
    '{"type": "send", "messages": "x"}',
    '{"type": "send", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "\\ud800"}]}]}',
    '{"type": "send", "messages": [{"id": "u", "role": "system", "parts": []}]}',
    '{"type": "send", "messages": [{"id": "u", "role": "user", "parts": []}], "request_key": 12345678}',
    '{"type": "send", "messages": [{"id": "u", "role": "user", "parts": []}], "request_key": "bad key"}',
    '{"type": "cancel", "run_id": {"x": 1}}',
    '{"type": "cancel", "run_id": "run_does_not_exist"}',
    '{"type": "cancel"}',
]


def _session(users) -> tuple[str, str]:
    sid = new_session_id()
    r = httpx.post(users["server"].url(f"{PREFIX}/sessions/"), json={"id": sid}, headers=users["a"][1])
    assert r.status_code == 201
    return sid, f"{users['server'].ws_base_url}/ws{PREFIX}/sessions/{sid}/"


@pytest.fixture
def ws_users(users, shared_server):
    return {**users, "server": shared_server}


def test_garbage_frames_answer_typed_errors_and_the_socket_survives(ws_users):
    from helix_django.models import Run

    sid, url = _session(ws_users)
    with connect(url, additional_headers=cookie_of(ws_users["a"][0]), max_size=None) as ws:
        for text in GARBAGE:
            ws.send(text)
            frame = json.loads(ws.recv(timeout=5))
            assert frame["type"] == "error", (text[:60], frame)
            assert frame["code"] in ("validation_error", "state_run_not_found", "validation_run_not_found"), frame
            assert "Traceback" not in json.dumps(frame)
        ws.send(b"\x00\x01binary")
        assert json.loads(ws.recv(timeout=5))["type"] == "error"
        ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        assert json.loads(ws.recv(timeout=5)) == {
            "type": "error",
            "error": "Stream not found",
            "code": "stream_not_found",
            "retryable": False,
        }
    assert not Run.objects.filter(session_id=sid).exists()


def test_rapid_reconnects_and_resumes_from_every_cursor_of_a_run(ws_users):
    sid, url = _session(ws_users)
    cookie = cookie_of(ws_users["a"][0])
    with connect(url, additional_headers=cookie) as ws:
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        assert json.loads(ws.recv(timeout=10))["type"] == "run"
        first = ws_frames(ws)
    assert first[-1] == {"type": "end", "status": "completed"}
    chunks = [f for f in first if f["type"] == "chunk"]
    for _ in range(10):  # open and drop sockets at once, mid-handshake and right after a resume
        with connect(url, additional_headers=cookie) as ws:
            ws.send(json.dumps({"type": "resume", "from_sequence": chunks[3]["sequence"]}))
    for cut in range(0, len(chunks), 7):
        cursor = chunks[cut]["sequence"]
        with connect(url, additional_headers=cookie) as ws:
            ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))
            ws.send(json.dumps({"type": "resume", "from_sequence": cursor}))  # a second resume replaces the first
            rest = ws_frames(ws, until=("end",))
            # the replaced reader may have sent a prefix; the last complete pass is after the last chunk <= cursor
            starts = [i for i, f in enumerate(rest) if f["type"] == "chunk" and f["sequence"] == cursor + 1]
            tail = rest[starts[-1] :] if starts else rest
        assert [f["sequence"] for f in tail if f["type"] == "chunk"] == [
            f["sequence"] for f in chunks if f["sequence"] > cursor
        ]
        assert text_of(chunks[: cut + 1]) + text_of(tail) == REPLY


def test_connect_refusals_close_with_typed_codes(ws_users):
    from websockets.exceptions import ConnectionClosed

    sid, _ = _session(ws_users)
    base = f"{ws_users['server'].ws_base_url}/ws{PREFIX}/sessions/"
    cookie = cookie_of(ws_users["a"][0])
    cases = [
        ("x" * 129, 4400),
        ("%E2%98%83", 4400),
        ("chat_unknown_one", 4404),
    ]
    for session_id, code in cases:
        with connect(base + session_id + "/", additional_headers=cookie) as ws:
            frame = json.loads(ws.recv(timeout=5))
            assert frame["type"] == "error" and frame["retryable"] is not None
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=5)
            assert ws.close_code == code, (session_id, ws.close_code)
    with connect(base + sid + "/", additional_headers=cookie_of(ws_users["b"][0])) as ws:  # another user's session
        assert json.loads(ws.recv(timeout=5))["code"] == "state_session_not_found"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
        assert ws.close_code == 4404
    with connect(base + sid + "/") as ws:  # no credentials
        json.loads(ws.recv(timeout=5))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
        assert ws.close_code == 4401


def test_a_send_on_a_socket_whose_session_was_deleted_is_typed_and_writes_nothing(ws_users):
    from helix_django.models import ChatSession, Message, Run

    sid, url = _session(ws_users)
    with connect(url, additional_headers=cookie_of(ws_users["a"][0])) as ws:
        r = httpx.delete(ws_users["server"].url(f"{PREFIX}/sessions/{sid}/"), headers=ws_users["a"][1])
        assert r.status_code == 204
        ws.send(json.dumps({"type": "send", "messages": [user_message("hello")]}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error", frame
        assert frame["code"] != "framework_internal_error", frame
        ws.send(json.dumps({"type": "cancel"}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and frame["code"] != "framework_internal_error", frame
    assert not ChatSession.objects.filter(pk=sid).exists()
    assert not Run.objects.filter(session_id=sid).exists()
    assert not Message.objects.filter(session_id=sid).exists()
