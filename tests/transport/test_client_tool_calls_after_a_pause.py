"""What a client holding a paused message gets over the chat route (002, "How handleChatStream resumes").

- a resume from its cursor after the tool-result continuation ended replays that run
  (the cursor is clamped to the run's start), never ``204``;
- a follow-up message abandons the pending call (the response says so with
  ``data-tool-output-elsewhere``), and a late browser result for it is 409
  ``state_run_superseded``.
"""

from __future__ import annotations

import copy
import json

import pytest
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django.models import Run
from helix_django.runtime.executor import get_executor
from helix_django.runtime.followups import ABANDONED_TEXT
from helix_django.snapshot import abuild_snapshot
from tests.transport.conftest import PREFIX, agent_settings, new_session_id, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

STEPS = [
    {"TEXT": "Pick a color. ", "TOOL_CALLS": [{"id": "c-1", "name": "pick_color", "arguments": {"prompt": "wall"}}]},
    {"TEXT": "Blue it is."},
]
RULES = [{"MATCH": "skip", "STEPS": [{"TEXT": "Skipped."}]}]


@pytest.fixture
def header(transactional_db):
    user = get_user_model().objects.create_user(username="erin", password="pw-not-secret")
    with override_settings(
        HELIX={**agent_settings(tools=["pick_color"], STEPS=STEPS, RULES=RULES), "FLUSH_INTERVAL_MS": 2}
    ):
        yield (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def chat(header, sid: str, body: dict | None = None, extra=()) -> tuple[int, list[tuple[int | None, dict]]]:
    """One chat-route request; returns the status and its SSE chunks as ``(sequence, chunk)`` (or the JSON error)."""
    from tests.asgi import application

    method, raw = ("POST", json.dumps(body).encode()) if body is not None else ("GET", b"")
    communicator = HttpCommunicator(application, method, f"{PREFIX}/sessions/{sid}/chat", raw, [header, *extra])
    response = await communicator.get_response(timeout=15)
    if dict(response["headers"]).get(b"content-type", b"").startswith(b"application/json"):
        return response["status"], [(None, json.loads(response["body"]))]
    events = []
    for block in response["body"].decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields.get("data", "[DONE]") != "[DONE]":
            events.append((int(fields["id"]) if "id" in fields else None, json.loads(fields["data"])))
    return response["status"], events


async def paused_session(header) -> tuple[str, dict, dict, int]:
    """Send a turn that pauses on a browser tool; return (session, user message, assistant message, cursor)."""
    sid = new_session_id()
    question = user_message("Paint the wall")
    status, events = await chat(header, sid, send_body(sid, [question]))
    assert status == 200 and events[-1][1]["type"] == "finish-step"  # paused: no finish
    run = await Run.objects.aget(session_id=sid)
    assert run.status == "suspended_client_tool"
    call = next(c for _s, c in events if c["type"] == "tool-input-available")
    held = {
        "id": run.response_message_id,
        "role": "assistant",
        "parts": [{"type": "tool-pick_color", "toolCallId": "c-1", "state": "input-available", "input": call["input"]}],
    }
    return sid, question, held, max(s for s, _c in events if s is not None)


def answered(held: dict, color: str) -> dict:
    message = copy.deepcopy(held)
    message["parts"][0].update(state="output-available", output={"color": color})
    return message


async def test_a_resume_below_an_ended_continuations_start_replays_it(header):
    sid, question, held, cursor = await paused_session(header)
    status, continued = await chat(header, sid, send_body(sid, [question, answered(held, "blue")]))
    assert status == 200 and continued[-1][1]["type"] == "finish"
    run = await Run.objects.aget(session_id=sid, kind="tool_result")
    assert await get_executor().wait(run.pk, 10) == "completed"
    assert cursor < run.start_sequence  # the client never saw the paused run's internal end chunk

    status, resumed = await chat(header, sid, extra=[(b"x-resume-from-sequence", str(cursor).encode())])
    assert status == 200
    chunks = [c for _s, c in resumed]
    assert {"type": "tool-output-available", "toolCallId": "c-1", "output": {"color": "blue"}} in chunks
    assert "".join(c.get("delta", "") for c in chunks if c["type"] == "text-delta") == "Blue it is."
    assert chunks[-1]["type"] == "finish"
    assert all(s > run.start_sequence for s, _c in resumed if s is not None)


async def test_a_follow_up_abandons_the_call_and_a_late_result_is_superseded(header):
    sid, question, held, _cursor = await paused_session(header)
    status, follow_up = await chat(header, sid, send_body(sid, [question, held, user_message("No, skip it")]))
    assert status == 200 and follow_up[-1][1]["type"] == "finish"
    chunks = [c for _s, c in follow_up]
    assert not any(c["type"] == "error" for c in chunks)
    elsewhere = [c["data"] for c in chunks if c["type"] == "data-tool-output-elsewhere"]
    assert [(d["toolCallId"], d["reason"]) for d in elsewhere] == [("c-1", "tool_output_elsewhere")]

    snapshot = await abuild_snapshot(sid)
    part = snapshot["messages"][1]["parts"][-1]
    assert (part["toolCallId"], part["state"], part["errorText"]) == ("c-1", "output-error", ABANDONED_TEXT)

    status, late = await chat(header, sid, send_body(sid, [question, answered(held, "red")]))
    assert status == 409 and late[0][1]["code"] == "state_run_superseded"
