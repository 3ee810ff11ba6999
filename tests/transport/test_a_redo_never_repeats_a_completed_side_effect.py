"""A Regenerate or Continue never runs a completed side effect again, however the model rewords the call.

The first run sends an email (``send_email``, its effect identified by ``to`` and
``subject``) and fails before its final text. Every redo surface then runs a model whose
call rewords the body, on each stream manager: the chat route's regenerate, the WebSocket
regenerate, the REST recovery regenerate and continue, and the admin's Regenerate; an edit
of the message is a new turn that sends its own email. The email is sent exactly
once, the new attempt's first model call is told of the completed call and its result
(000, "Keep a last-safe context checkpoint"), and a reworded call of the same turn is
answered from the record (000, "Tool calls make recovery harder").
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token

from helix_django.models import ChatSession, Run, ToolExecution
from helix_django.recovery import inventory as inv
from helix_django.runtime.executor import get_executor
from helix_django.runtime.tool_calls import REPLAYED
from helix_django.transport.routing import helix_websocket_routes
from tests.runtime import effects
from tests.transport.conftest import PREFIX, agent_settings, new_session_id, user_message

TASKS_LAUNCHER = "helix_django.runtime.launchers.tasks.TasksLauncher"

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

STEPS = [
    {
        "TEXT": "Sending it. ",
        "TOOL_CALLS": [
            {"name": "send_email", "arguments": {"to": "ada@example.com", "subject": "Invoice 7", "body": "-"}}
        ],
    },
    {"TEXT": "The email is on its way to Ada."},
]


@pytest.fixture
def outbox(tmp_path, monkeypatch, backend):
    """The HELIX setting with the rewording model and ``send_email`` on each stream manager; a fresh outbox file."""
    monkeypatch.setenv(effects.OUTBOX_ENV, str(tmp_path / "outbox.jsonl"))
    helix = agent_settings()
    helix["AGENTS"]["default"]["PROVIDER"] = {
        "BACKEND": f"{effects.PATH}.RewordingProvider",
        "OPTIONS": {"STEPS": STEPS, "OWN_EFFECT": {"FAIL_AFTER_CHUNKS": 2}},
    }
    helix["AGENTS"]["default"]["TOOLS"] = [f"{effects.PATH}.send_email"]
    effects.RewordingProvider.requests = []
    with override_settings(HELIX={**helix, "FLUSH_INTERVAL_MS": 2, "STREAM_MANAGERS": {"default": backend[1]}}):
        yield


@pytest.fixture
def owner(transactional_db):
    user = get_user_model().objects.create_user(username="ada-owner", password="pw-not-secret")
    return user, (b"authorization", f"Token {Token.objects.create(user=user).key}".encode())


async def http(method: str, path: str, header, body: dict | None = None):
    from tests.asgi import application

    raw = json.dumps(body).encode() if body is not None else b""
    communicator = HttpCommunicator(application, method, path, body=raw, headers=[header])
    response = await communicator.get_response(timeout=10)
    return response["status"], response["body"]


async def first_attempt(header) -> tuple[Run, dict]:
    """A run that sent the email and failed before its final text; returns it and its user message."""
    session_id, turn = new_session_id(), user_message("Email Ada invoice 7")
    body = {"id": session_id, "messages": [turn], "trigger": "submit-message"}
    status, _body = await http("POST", f"{PREFIX}/sessions/{session_id}/chat", header, body)
    assert status == 200
    run = await Run.objects.aget(session_id=session_id)
    assert await get_executor().wait(run.pk, 10) == "failed"
    assert [m["body"] for m in effects.sent()] == [f"Sent by {run.pk}"]
    return run, turn


async def assert_sent_once_and_told(first: Run) -> Run:
    """The redo completed without sending again; its first model call was told of the email."""
    new = await Run.objects.filter(session_id=first.session_id).exclude(pk=first.pk).alatest("created_at")
    status = await get_executor().wait(new.pk, 10)
    assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}"]
    assert status == "completed"
    calls = [r for r in effects.RewordingProvider.requests if r.run_id == new.pk]
    assert effects.told_of(calls[-1].messages, first.pk)
    return new


async def test_a_chat_route_regenerate_keeps_the_sent_email_in_the_new_attempt(outbox, owner):
    _user, header = owner
    first, turn = await first_attempt(header)
    body = {"id": first.session_id, "messages": [turn], "trigger": "regenerate-message"}
    status, _body = await http("POST", f"{PREFIX}/sessions/{first.session_id}/chat", header, body)
    assert status == 200
    new = await assert_sent_once_and_told(first)
    calls = [r for r in effects.RewordingProvider.requests if r.run_id == new.pk]
    assert effects.told_of(calls[0].messages, first.pk)  # its very first call: no reworded call is asked for
    assert await ToolExecution.objects.filter(run=new).acount() == 0


async def test_a_websocket_regenerate_keeps_the_sent_email(outbox, owner):
    user, header = owner
    first, turn = await first_attempt(header)
    router = URLRouter(helix_websocket_routes())

    async def app(scope, receive, send):
        return await router({**scope, "user": user}, receive, send)

    socket = WebsocketCommunicator(app, f"/ws/helix/api/sessions/{first.session_id}/")
    connected, _ = await socket.connect()
    assert connected
    await socket.send_json_to({"type": "send", "messages": [turn], "trigger": "regenerate-message"})
    frame = await socket.receive_json_from(timeout=10)
    assert frame["type"] != "error", frame
    await assert_sent_once_and_told(first)
    await socket.disconnect()


async def test_a_rest_recovery_regenerate_keeps_the_sent_email(outbox, owner):
    _user, header = owner
    first, _turn = await first_attempt(header)
    status, body = await http("POST", f"{PREFIX}/sessions/{first.session_id}/runs/{first.pk}/regenerate", header)
    assert status in (200, 201, 202), body
    await assert_sent_once_and_told(first)


async def test_a_continue_answers_the_reworded_call_from_the_record(outbox, owner):
    _user, header = owner
    first, _turn = await first_attempt(header)
    status, body = await http("POST", f"{PREFIX}/sessions/{first.session_id}/runs/{first.pk}/continue", header)
    assert status in (200, 201, 202), body
    new = await assert_sent_once_and_told(first)
    replayed = await ToolExecution.objects.aget(run=new)
    assert (replayed.name, replayed.status, replayed.error_code) == ("send_email", "succeeded", REPLAYED)
    assert replayed.arguments["body"] == f"Sent by {new.pk}"  # the reworded call, answered with the first result
    assert replayed.result["body"] == f"Sent by {first.pk}"


def test_the_admins_regenerate_keeps_the_sent_email(outbox, owner):
    _user, header = owner
    first, _turn = async_to_sync(first_attempt)(header)
    staff = get_user_model().objects.create_superuser("staff", password="pw-not-secret")
    client = Client()
    client.force_login(staff)
    response = client.post(reverse("admin:helix_django_run_recovery", args=[quote(first.pk), inv.REGENERATE]))
    assert response.status_code in (200, 302)
    async_to_sync(assert_sent_once_and_told)(first)


async def test_a_regenerate_after_a_replay_keeps_one_step_per_sent_email(outbox, owner):
    """A second Regenerate of the turn keeps the email once (a replayed record performed nothing)."""
    _user, header = owner
    first, turn = await first_attempt(header)
    path = f"{PREFIX}/sessions/{first.session_id}/runs/{first.pk}/continue"
    assert (await http("POST", path, header))[0] in (200, 201, 202)
    await assert_sent_once_and_told(first)
    body = {"id": first.session_id, "messages": [turn], "trigger": "regenerate-message"}
    status, _body = await http("POST", f"{PREFIX}/sessions/{first.session_id}/chat", header, body)
    assert status == 200
    latest = await Run.objects.filter(session_id=first.session_id).alatest("created_at")
    assert await get_executor().wait(latest.pk, 10) == "completed"
    assert len(effects.sent()) == 1
    messages = [r for r in effects.RewordingProvider.requests if r.run_id == latest.pk][0].messages
    assert sum(1 for m in messages if m.get("role") == "tool") == 1


async def test_an_edit_of_the_turn_asks_anew(outbox, owner):
    """An edit sends another text under the same message id: a new turn, whose email is its own."""
    _user, header = owner
    first, turn = await first_attempt(header)
    edited = {**turn, "parts": [{"type": "text", "text": "Email Ada invoice 7, and mention the discount"}]}
    body = {"id": first.session_id, "messages": [edited], "trigger": "submit-message", "messageId": turn["id"]}
    status, _body = await http("POST", f"{PREFIX}/sessions/{first.session_id}/chat", header, body)
    assert status == 200
    new = await Run.objects.filter(session_id=first.session_id).exclude(pk=first.pk).alatest("created_at")
    await get_executor().wait(new.pk, 10)
    assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}", f"Sent by {new.pk}"]


def test_the_admin_shows_a_replayed_call_as_answered_from_its_record(outbox, owner):
    _user, header = owner
    first, _turn = async_to_sync(first_attempt)(header)
    path = f"{PREFIX}/sessions/{first.session_id}/runs/{first.pk}/continue"
    assert async_to_sync(http)("POST", path, header)[0] in (200, 201, 202)
    new = async_to_sync(assert_sent_once_and_told)(first)
    staff = get_user_model().objects.create_superuser("staff", password="pw-not-secret")
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("admin:helix_django_run_change", args=[quote(new.pk)])).content.decode()
    assert "answered from an earlier execution, not run" in page


async def test_a_regenerate_handed_to_a_task_worker_keeps_the_sent_email(outbox, owner, settings):
    """A task worker rebuilds the new answer from its stream: the kept step reaches its model too."""
    from django_tasks_db.models import DBTaskResult

    from helix_django.runtime.launchers.handoff import arun_handed_off

    _user, header = owner
    first, _turn = await first_attempt(header)
    with override_settings(HELIX={**settings.HELIX, "LAUNCHER": {"BACKEND": TASKS_LAUNCHER}}):
        session = await ChatSession.objects.aget(pk=first.session_id)
        handle = await get_executor().regenerate(session=session)
        task = await DBTaskResult.objects.aget()
        run_id, from_owner, data = task.args_kwargs["args"]
        assert run_id == handle.run_id
        assert await arun_handed_off(run_id, from_owner, data) == "completed"
    assert [m["body"] for m in effects.sent()] == [f"Sent by {first.pk}"]
    calls = [r for r in effects.RewordingProvider.requests if r.run_id == handle.run_id]
    assert effects.told_of(calls[0].messages, first.pk)
