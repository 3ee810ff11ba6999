"""No route starts a model call over a side-effecting tool whose outcome is unknown (000, "Reconcile ...").

Each route is driven in-process (Channels communicators on the suite's ASGI application)
with a provider that records its calls: the chat route (regenerate, edit, keyed), the
WebSocket send and the REST recovery routes all answer 409 ``state_run_not_actionable``
and the provider is called 0 times; a send of a new turn still runs.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token

from helix_django.models import Run, ToolExecution
from helix_django.recovery.outcomes import ainterrupt
from helix_django.recovery.partial import arebuild_partial
from helix_django.runtime.executor import get_executor
from helix_django.transport.routing import helix_websocket_routes
from tests.recovery.factories import InFlight
from tests.runtime import toolbox
from tests.transport.conftest import PREFIX, agent_settings, new_session_id, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

RECORDING = {"BACKEND": f"{toolbox.PATH}.RecordingProvider", "OPTIONS": {"TEXT": "A new answer."}}


@pytest.fixture
def recorded():
    """The HELIX setting with a call-recording provider; yields its list of calls."""
    helix = agent_settings(tools=["charge_card"])
    helix["AGENTS"]["default"]["PROVIDER"] = RECORDING
    toolbox.RecordingProvider.requests = []
    with override_settings(HELIX={**helix, "FLUSH_INTERVAL_MS": 2}):
        yield toolbox.RecordingProvider.requests


@pytest.fixture
def owner(transactional_db):
    user = get_user_model().objects.create_user(username="dana", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


@sync_to_async
def _crashed_in_tool(user) -> Run:
    """A run whose process died inside a side-effecting tool (its lease expired)."""
    flight = InFlight(new_session_id(), owner=user)
    flight.stream_text("Charging your card now.")
    flight.tool("call_charge", "charge_card", effect="side_effect", status="started", key="charge:o-1")
    flight.expire()
    return flight.run


async def blocked_run(user) -> Run:
    """An interrupted run whose side-effecting ``charge_card`` call has an unknown outcome."""
    run = await _crashed_in_tool(user)
    await ainterrupt(run, await arebuild_partial(run), stage=run.status, cause="process_lost")
    assert await ToolExecution.objects.filter(run=run, status="unknown").acount() == 1
    return await Run.objects.aget(pk=run.pk)


async def http(method: str, path: str, header, body: dict | None = None, extra=()):
    from tests.asgi import application

    raw = json.dumps(body).encode() if body is not None else b""
    communicator = HttpCommunicator(application, method, path, body=raw, headers=[header, *extra])
    response = await communicator.get_response(timeout=10)
    return response["status"], response["body"]


def chat_body(run: Run, trigger: str, **extra) -> dict:
    turn = {"id": run.turn_message_id, "role": "user", "parts": [{"type": "text", "text": "Charge it"}]}
    return {"id": run.session_id, "messages": [turn], "trigger": trigger, **extra}


async def assert_refused(status: int, body: bytes, run: Run) -> None:
    error = json.loads(body)
    assert (status, error["code"], error["cause"]) == (409, "state_run_not_actionable", "tool_outcome_unknown")
    assert "charge_card" in error["error"] and "o-1" not in error["error"]
    assert await Run.objects.filter(session_id=run.session_id).acount() == 1


@pytest.mark.parametrize(
    ("trigger", "extra", "headers"),
    [
        ("regenerate-message", {}, ()),
        ("regenerate-message", {}, ((b"x-helix-request-key", b"rk-regenerate-1"),)),
        ("submit-message", {"messageId": "EDIT"}, ()),
    ],
    ids=["regenerate", "keyed-regenerate", "edit"],
)
async def test_the_chat_route_refuses_a_redo_and_calls_no_model(recorded, owner, trigger, extra, headers):
    user, header = owner
    run = await blocked_run(user)
    extra = {k: run.turn_message_id if v == "EDIT" else v for k, v in extra.items()}
    status, body = await http(
        "POST", f"{PREFIX}/sessions/{run.session_id}/chat", header, chat_body(run, trigger, **extra), headers
    )
    await assert_refused(status, body, run)
    assert recorded == []


async def test_the_chat_route_refuses_a_regenerate_of_a_crashed_run_it_retires(recorded, owner):
    user, header = owner
    run = await _crashed_in_tool(user)  # still "tooling": the regenerate itself finds it dead
    status, body = await http(
        "POST", f"{PREFIX}/sessions/{run.session_id}/chat", header, chat_body(run, "regenerate-message")
    )
    await assert_refused(status, body, run)
    assert (await Run.objects.aget(pk=run.pk)).status == "interrupted"
    assert recorded == []


@pytest.mark.parametrize("trigger", ["regenerate-message", "edit"])
async def test_a_websocket_send_refuses_a_redo_and_calls_no_model(recorded, owner, trigger):
    user, _header = owner
    run = await blocked_run(user)
    router = URLRouter(helix_websocket_routes())

    async def app(scope, receive, send):
        return await router({**scope, "user": user}, receive, send)

    socket = WebsocketCommunicator(app, f"/ws/helix/api/sessions/{run.session_id}/")
    connected, _ = await socket.connect()
    assert connected
    send = {"type": "send", "messages": chat_body(run, "submit-message")["messages"]}
    if trigger == "edit":
        send["messageId"] = run.turn_message_id
    else:
        send["trigger"] = trigger
    await socket.send_json_to(send)
    frame = await socket.receive_json_from(timeout=10)
    await socket.disconnect()
    assert (frame["type"], frame["code"], frame["cause"]) == (
        "error",
        "state_run_not_actionable",
        "tool_outcome_unknown",
    )
    assert await Run.objects.filter(session_id=run.session_id).acount() == 1
    assert recorded == []


@pytest.mark.parametrize("action", ["regenerate", "continue"])
async def test_the_rest_recovery_routes_refuse_and_call_no_model(recorded, owner, action):
    user, header = owner
    run = await blocked_run(user)
    status, body = await http("POST", f"{PREFIX}/sessions/{run.session_id}/runs/{run.pk}/{action}", header)
    error = json.loads(body)
    assert (status, error["code"], error["cause"]) == (409, "state_run_not_actionable", action)
    assert await Run.objects.filter(session_id=run.session_id).acount() == 1
    assert recorded == []


async def test_a_send_of_a_new_turn_still_runs(recorded, owner):
    user, header = owner
    run = await blocked_run(user)
    body = {"id": run.session_id, "messages": [user_message("Something else")], "trigger": "submit-message"}
    status, _body = await http("POST", f"{PREFIX}/sessions/{run.session_id}/chat", header, body)
    assert status == 200
    new = await Run.objects.exclude(pk=run.pk).aget(session_id=run.session_id)
    assert await get_executor().wait(new.pk, 10) == "completed"
    assert len(recorded) == 1
