"""Tool-result continuation through the chat route, heartbeats and incremental flushing, over daphne."""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Run, RunStatus
from tests.api.conftest import CLIENT_TOOL_STEPS
from tests.transport.conftest import (
    PREFIX,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_tool_output_continuation_reuses_the_assistant_message_id(daphne_server_factory, users):
    server = daphne_server_factory(helix=agent_settings(tools=["pick_color"], STEPS=CLIENT_TOOL_STEPS))
    sid = new_session_id()
    question = user_message("colors?")
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [question]))
        assert sent.done
        snap = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
        assert snap["status"] == "paused"
        assistant = snap["messages"][-1]
        # The browser answers the first call only: a partial batch is an empty 200 stream, and the run waits.
        first = _answered(assistant, {"call_1": {"color": "red"}})
        partial = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [question, first]))
        assert partial.status == 200 and partial.events == []
        assert Run.objects.get(session_id=sid).status == RunStatus.SUSPENDED_CLIENT_TOOL
        both = _answered(assistant, {"call_1": {"color": "red"}, "call_2": {"color": "blue"}})
        cont = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [question, both]))
    assert cont.status == 200 and cont.done
    assert cont.chunks[0] == {"type": "start", "messageId": assistant["id"]}
    assert "Thanks for the colors." in cont.text
    # The tool results of the calls the client holds are forwarded, not turned into elsewhere markers.
    assert not any(c["type"] == "data-tool-output-elsewhere" for c in cont.chunks)


def _answered(message, outputs):
    parts = []
    for part in message["parts"]:
        if part.get("toolCallId") in outputs:
            part = {**part, "state": "output-available", "output": outputs[part["toolCallId"]]}
        parts.append(part)
    return {**message, "parts": parts}


def test_frames_are_flushed_at_once_and_idle_streams_get_heartbeats(daphne_server_factory, users):
    server = daphne_server_factory(
        helix={**agent_settings(TEXT="one two three four five six", PACE_TPS=4), "HEARTBEAT_SECONDS": 0.1}
    )
    sid = new_session_id()
    seen = []
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        started = time.monotonic()
        with client.stream("POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")])) as response:
            for line in response.iter_lines():
                seen.append((time.monotonic() - started, line))
    first_delta = next(t for t, line in seen if '"text-delta"' in line)
    last_delta = max(t for t, line in seen if '"text-delta"' in line)
    assert last_delta - first_delta > 0.8  # the deltas arrived one by one, as the run wrote them
    assert any(line == ": keep-alive" for _t, line in seen)
    assert seen[-2][1] == "data: [DONE]" or seen[-1][1] == "data: [DONE]"


def test_resume_without_cursor_of_a_continuation_rebuilds_the_whole_message(daphne_server_factory, users):
    from helix_django.protocol import MessageAccumulator

    server = daphne_server_factory(helix=agent_settings(tools=["pick_color"], STEPS=CLIENT_TOOL_STEPS, PACE_TPS=5))
    sid = new_session_id()
    question = user_message("colors?")
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [question]))
        assistant = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()["messages"][-1]
        both = _answered(assistant, {"call_1": {"color": "red"}, "call_2": {"color": "blue"}})
        read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [question, both]), stop_after=3)
        # A page reload: a stock useChat({resume: true}) reconnect has no cursor.
        resumed = read_sse(client, "GET", chat_url(server, sid))
        final = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()
    assert resumed.status == 200 and resumed.done
    assert resumed.chunks[0]["type"] == "start" and resumed.chunks[0]["messageId"] == assistant["id"]
    assert resumed.chunks[1]["type"] == "data-helix-replay"
    acc = MessageAccumulator("")
    for chunk in resumed.chunks:
        acc.apply(chunk)
    assert acc.snapshot() == final["messages"][-1]
    assert {p.get("toolCallId") for p in acc.snapshot()["parts"]} >= {"call_1", "call_2"}
