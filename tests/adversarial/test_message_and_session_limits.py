"""The largest message and the largest session (issue 20; docs/limits.md), on every route that adds a message.

In process (Channels' communicators on the suite's ASGI app), on the suite's database
(SQLite, and PostgreSQL in the PostgreSQL pass). Each refusal is typed, not retryable,
and writes nothing: no session, run, message or tool answer. A run whose answer grows
past ``MAX_MESSAGE_BYTES`` fails with ``run_response_too_large``, its answer so far kept,
marked partial and under the limit.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from helix_django.limits import json_size
from helix_django.models import ChatSession, Message, Run, ToolExecution
from tests.transport.conftest import agent_settings, new_session_id, send_body, user_message

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = "/helix/api"
MESSAGE_LIMIT = 64 * 1024
FULL = {"code": "state_session_full", "retryable": False, "cause": "session_messages", "limitMessages": 2}


@pytest.fixture
def token(transactional_db):
    user = get_user_model().objects.create_user(username="dora", password="pw-not-secret")
    return (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


@pytest.fixture
def limits(settings):
    """A session full after one turn (user + answer); messages of at most 64 KiB."""
    settings.HELIX = {
        **agent_settings(tools=["pick_color"], TEXT="Fine."),
        "MAX_SESSION_MESSAGES": 2,
        "MAX_MESSAGE_BYTES": MESSAGE_LIMIT,
        "MAX_TOOL_RESULT_BYTES": 32 * 1024,
    }
    return settings


async def http(method, path, token, body=None, extra=()):
    from tests.asgi import application

    raw = json.dumps(body).encode() if body is not None else b""
    headers = [token, (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *extra]
    communicator = HttpCommunicator(application, method, path, body=raw, headers=headers)
    response = await communicator.get_response(timeout=20)
    return response["status"], response["body"]


async def ws_send(token, sid, messages):
    """Send ``messages`` over the WebSocket; return the first frame that is not a chunk."""
    from tests.asgi import application

    communicator = WebsocketCommunicator(application, f"/ws{PREFIX}/sessions/{sid}/", headers=[token])
    connected, _code = await communicator.connect(timeout=10)
    assert connected
    await communicator.send_json_to({"type": "send", "messages": messages})
    try:
        while True:
            frame = await communicator.receive_json_from(timeout=10)
            if frame["type"] != "chunk":
                return frame
    finally:
        await communicator.disconnect()


async def wait_ended(sid):
    for _ in range(500):
        if not [r async for r in Run.objects.filter(session_id=sid) if r.is_live]:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not end")


async def full_session(token):
    """A session holding one turn: its 2 messages fill it."""
    sid = new_session_id()
    status, _body = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, send_body(sid, [user_message("hi")]))
    assert status == 200
    await wait_ended(sid)
    assert (await ChatSession.objects.aget(pk=sid)).message_count == 2
    return sid


async def counts(sid):
    return (
        await Run.objects.filter(session_id=sid).acount(),
        await Message.objects.filter(session_id=sid).acount(),
    )


def refusal(status, raw):
    body = json.loads(raw)
    return status, {k: v for k, v in body.items() if k != "error"}


async def test_a_send_to_a_full_session_is_refused_on_the_chat_route(limits, token):
    sid = await full_session(token)
    before = await counts(sid)
    status, raw = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, send_body(sid, [user_message("more")]))
    assert refusal(status, raw) == (409, FULL | {"messageCount": 2})
    assert await counts(sid) == before


async def test_a_send_to_a_full_session_is_refused_on_the_ai_sdk_route(limits, token):
    sid = await full_session(token)
    before = await counts(sid)
    status, raw = await http("POST", f"{PREFIX}/chat", token, send_body(sid, [user_message("more")]))
    assert refusal(status, raw) == (409, FULL | {"messageCount": 2})
    assert await counts(sid) == before


async def test_a_send_to_a_full_session_is_refused_on_the_websocket(limits, token):
    sid = await full_session(token)
    before = await counts(sid)
    frame = await ws_send(token, sid, [user_message("more")])
    assert {k: v for k, v in frame.items() if k != "error"} == {"type": "error", **FULL, "messageCount": 2}
    assert await counts(sid) == before


async def test_a_regenerate_in_a_full_session_replaces_the_answer(limits, token):
    sid = await full_session(token)
    body = {**send_body(sid, [user_message("hi")]), "trigger": "regenerate-message"}
    status, _raw = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, body)
    assert status == 200
    await wait_ended(sid)
    assert (await ChatSession.objects.aget(pk=sid)).message_count == 2


def big_message(size=MESSAGE_LIMIT):
    return user_message("x" * size)


@pytest.mark.parametrize("route", ["chat", "aisdk", "websocket"])
async def test_a_message_over_the_limit_is_refused_and_nothing_is_written(limits, token, route):
    sid = new_session_id()
    message = big_message()
    expected = {
        "code": "validation_message_too_large",
        "retryable": False,
        "cause": "message",
        "limitBytes": MESSAGE_LIMIT,
        "sizeBytes": json_size({**message, "metadata": {}}),
    }
    if route == "websocket":
        await ChatSession.objects.acreate(pk=sid, owner=await get_user_model().objects.aget(username="dora"))
        frame = await ws_send(token, sid, [message])
        assert {k: v for k, v in frame.items() if k != "error"} == {"type": "error", **expected}
        assert await counts(sid) == (0, 0)
        return
    path = f"{PREFIX}/sessions/{sid}/chat" if route == "chat" else f"{PREFIX}/chat"
    status, raw = await http("POST", path, token, send_body(sid, [message]))
    assert refusal(status, raw) == (413, expected)
    assert not await ChatSession.objects.filter(pk=sid).aexists()


async def test_a_message_at_the_limit_is_stored(limits, token):
    sid = new_session_id()
    message = big_message(MESSAGE_LIMIT - 200)
    status, _raw = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, send_body(sid, [message]))
    assert status == 200
    await wait_ended(sid)
    stored = await Message.objects.aget(session_id=sid, role="user")
    assert stored.parts == message["parts"]


async def paused_run(token):
    sid = new_session_id()
    status, _raw = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, send_body(sid, [user_message("pick")]))
    assert status == 200
    run = await Run.objects.aget(session_id=sid)
    assert run.status == "suspended_client_tool"
    return sid, run


@pytest.fixture
def tool_limits(limits):
    limits.HELIX = {
        **limits.HELIX,
        **agent_settings(
            tools=["pick_color"], TOOL_CALLS=[{"name": "pick_color", "arguments": {"prompt": "p"}, "id": "call_p"}]
        ),
        "MAX_SESSION_MESSAGES": 10,
        "MAX_TOOL_RESULT_BYTES": 2 * MESSAGE_LIMIT,
    }
    return limits


async def test_tool_results_that_would_grow_the_answer_past_the_limit_are_refused(tool_limits, token):
    sid, run = await paused_run(token)
    path = f"{PREFIX}/sessions/{sid}/runs/{run.id}/tool-results"
    # Under MAX_TOOL_RESULT_BYTES, past the room the answer has left.
    results = {"results": [{"toolCallId": "call_p", "output": "y" * (MESSAGE_LIMIT - 2000)}]}
    status, raw = await http("POST", path, token, results)
    code, body = refusal(status, raw)
    assert (code, body["code"], body["cause"], body["limitBytes"]) == (
        413,
        "validation_message_too_large",
        "tool_result",
        MESSAGE_LIMIT,
    )
    execution = await ToolExecution.objects.aget(run_id=run.id, tool_call_id="call_p")
    assert execution.status == "awaiting_client" and execution.result is None
    status, raw = await http("POST", path, token, {"results": [{"toolCallId": "call_p", "output": "red"}]})
    assert status == 200 and json.loads(raw)["continued"] is True
    await wait_ended(sid)


async def test_a_tool_result_continuation_in_a_full_session_is_not_refused(tool_limits, token):
    tool_limits.HELIX = {**tool_limits.HELIX, "MAX_SESSION_MESSAGES": 2}
    sid, run = await paused_run(token)
    path = f"{PREFIX}/sessions/{sid}/runs/{run.id}/tool-results"
    status, raw = await http("POST", path, token, {"results": [{"toolCallId": "call_p", "output": "red"}]})
    assert status == 200 and json.loads(raw)["continued"] is True  # it adds no message
    await wait_ended(sid)
    assert (await ChatSession.objects.aget(pk=sid)).message_count == 2


async def test_an_answer_growing_past_the_limit_fails_the_run_and_keeps_the_partial(limits, token):
    limits.HELIX = {**limits.HELIX, **agent_settings(TEXT=" ".join(["word"] * 30_000)), "MAX_SESSION_MESSAGES": 10}
    sid = new_session_id()
    status, raw = await http("POST", f"{PREFIX}/sessions/{sid}/chat", token, send_body(sid, [user_message("go")]))
    assert status == 200
    await wait_ended(sid)
    run = await Run.objects.aget(session_id=sid)
    assert (run.status, run.error_code, run.error_retryable) == ("failed", "run_response_too_large", False)
    answer = await Message.objects.aget(session_id=sid, role="assistant")
    stored = answer.to_ui_message()
    assert MESSAGE_LIMIT - 8192 < json_size(stored) <= MESSAGE_LIMIT
    assert stored["metadata"]["helix"]["partial"] is True
    frames = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    error = json.loads(frames[-1]["errorText"]) if frames[-1]["type"] == "error" else frames[-1]
    assert error["code"] == "run_response_too_large" and error["limitBytes"] == MESSAGE_LIMIT
    # the figures tell what was passed: the answer's share of the limit (its ending's reserve left)
    assert error["answerLimitBytes"] == MESSAGE_LIMIT - 4096 < error["sizeBytes"]
    sent = "".join(f.get("delta", "") for f in frames if f["type"] == "text-delta")
    assert sent == "".join(p.get("text", "") for p in stored["parts"])
