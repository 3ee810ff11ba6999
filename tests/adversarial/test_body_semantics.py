"""Bodies that are well-formed JSON but semantically absurd: duplicate ids, unknown edit targets, odd triggers."""

from __future__ import annotations

import httpx
import pytest

from helix_django.models import Run
from tests.adversarial.conftest import assert_typed_refusal
from tests.transport.conftest import PREFIX, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True)]


def _assistant(mid: str) -> dict:
    return {"id": mid, "role": "assistant", "parts": [{"type": "text", "text": "a"}]}


CASES = [
    ("dup-user-ids", lambda sid: send_body(sid, [user_message("a", "u_same"), user_message("b", "u_same")])),
    ("user-id-equals-assistant", lambda sid: send_body(sid, [_assistant("m1"), user_message("b", "m1")])),
    ("edit-unknown", lambda sid: {**send_body(sid, [user_message("x", "u_new")]), "messageId": "u_missing"}),
    ("regenerate-empty", lambda sid: {**send_body(sid, [user_message("x")]), "trigger": "regenerate-message"}),
    (
        "regenerate-unknown",
        lambda sid: {"id": sid, "messages": [_assistant("m_x")], "trigger": "regenerate-message", "messageId": "m_x"},
    ),
    ("assistant-only", lambda sid: send_body(sid, [_assistant("m_only")])),
    (
        "assistant-tool-unknown",
        lambda sid: send_body(
            sid,
            [
                user_message("x"),
                {
                    "id": "m_t",
                    "role": "assistant",
                    "parts": [
                        {"type": "tool-pick", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1}
                    ],
                },
            ],
        ),
    ),
    ("parts-empty", lambda sid: send_body(sid, [{"id": "u_e", "role": "user", "parts": []}])),
    (
        "part-unknown-type",
        lambda sid: send_body(sid, [{"id": "u_p", "role": "user", "parts": [{"type": "bogus", "text": 5}]}]),
    ),
    (
        "text-not-string",
        lambda sid: send_body(sid, [{"id": "u_n", "role": "user", "parts": [{"type": "text", "text": {"a": 1}}]}]),
    ),
    (
        "file-part-garbage",
        lambda sid: send_body(
            sid, [{"id": "u_f", "role": "user", "parts": [{"type": "file", "url": 5, "mediaType": None}]}]
        ),
    ),
    (
        "tool-part-no-call-id",
        lambda sid: send_body(
            sid,
            [
                user_message("x"),
                {
                    "id": "m_t2",
                    "role": "assistant",
                    "parts": [{"type": "tool-pick", "state": "output-available", "input": {}, "output": 1}],
                },
            ],
        ),
    ),
    (
        "tool-call-id-int",
        lambda sid: send_body(
            sid,
            [
                user_message("x"),
                {
                    "id": "m_t3",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "dynamic-tool",
                            "toolName": "t",
                            "toolCallId": 7,
                            "state": "output-available",
                            "input": {},
                            "output": 1,
                        }
                    ],
                },
            ],
        ),
    ),
    (
        "reasoning-text-null",
        lambda sid: send_body(
            sid,
            [
                user_message("x"),
                {"id": "m_r", "role": "assistant", "parts": [{"type": "reasoning", "text": None}]},
                user_message("y"),
            ],
        ),
    ),
    ("many-messages", lambda sid: send_body(sid, [user_message("m", f"u{i}") for i in range(150)])),
]


def test_semantically_absurd_bodies_never_500(shared_server, users):
    for name, build in CASES:
        _check_case(shared_server, users, name, build)


def _check_case(shared_server, users, name, build):
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        result = read_sse(client, "POST", chat_url(shared_server, sid), json=build(sid))
        if result.status != 200:
            assert_typed_refusal(result.status, result.body, statuses=(400, 404, 409))
            assert not Run.objects.filter(session_id=sid).exists()
        else:
            errors = [c for c in result.chunks if c.get("type") == "error"]
            assert not any("framework_internal_error" in c["errorText"] for c in errors), errors
        snap = client.get(shared_server.url(f"{PREFIX}/sessions/{sid}/snapshot"))
        assert snap.status_code in (200, 404), (name, snap.status_code, snap.text[:200])


def test_parts_the_model_context_reads_must_have_their_types(shared_server, users):
    """A text part with non-string text was a run started then failed with a 500 (``after_run_start``)."""
    for name in ("text-not-string", "tool-part-no-call-id", "tool-call-id-int", "reasoning-text-null"):
        sid = new_session_id()
        with httpx.Client(headers=users["a"][1], timeout=20) as client:
            r = client.post(chat_url(shared_server, sid), json=dict(CASES)[name](sid))
        assert_typed_refusal(r.status_code, r.json(), statuses=(400,))
        assert r.json()["cause"] == "body", name
        assert not Run.objects.filter(session_id=sid).exists()


def test_a_post_without_a_body_is_a_resume(shared_server, users):
    """No body holds no message: the chat route answers a POST without one exactly as a GET (docs/transport.md)."""
    sid = new_session_id()
    url = chat_url(shared_server, sid)
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        for method in ("GET", "POST"):
            refused = client.request(method, url, content=b"")
            assert (refused.status_code, refused.json()["code"]) == (404, "state_session_not_found"), method
        sent = read_sse(client, "POST", url, json=send_body(sid, [user_message("hello")]))
        assert sent.status == 200 and sent.events[-1].data == "[DONE]"
        for method in ("GET", "POST"):
            assert client.request(method, url, content=b"").status_code == 204, method  # finished: nothing to resume
        cursor = {"X-Resume-From-Sequence": sent.events[2].id}
        by_get = read_sse(client, "GET", url, headers=cursor)
        by_post = read_sse(client, "POST", url, headers=cursor, content=b"")
    assert by_post.status == by_get.status == 200
    assert by_post.events == by_get.events and by_post.events[-1].data == "[DONE]"
    assert Run.objects.filter(session_id=sid).count() == 1
