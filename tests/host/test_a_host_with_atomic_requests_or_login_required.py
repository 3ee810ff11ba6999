"""Two common host settings helix's routes must live with: ``ATOMIC_REQUESTS`` and ``LoginRequiredMiddleware``.

Found by a new user installing helix into an existing project (seventeenth session):

- ``DATABASES[...]["ATOMIC_REQUESTS"] = True`` wrapped helix's REST views in the request's
  transaction: a Stop (``runs/<id>/cancel``) held the database's write lock while it waited
  for the run's task to commit its ending, so it took 15 s and answered ``streaming``; a
  client tool's result waited 20 s and was lost (``503 state_history_incomplete``). Helix's
  store commits its own transactions: its views opt out of the request transaction.
- Django's ``LoginRequiredMiddleware`` (5.1+) redirected a JWT caller of the chat route to
  the login page (302, HTML) and an anonymous one too, instead of the typed 401: the
  route's view is marked ``login_not_required``, as DRF marks its views.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import HttpCommunicator
from django.db import connections

from helix_django.models import Run, RunStatus
from tests.host.conftest import HOST, call, new_session_id, send_body
from tests.transport.conftest import agent_settings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

JSON = (b"content-type", b"application/json")
LOGIN_REQUIRED = "django.contrib.auth.middleware.LoginRequiredMiddleware"
CLIENT_TOOL_STEPS = [
    {"TEXT": "Pick a color. ", "TOOL_CALLS": [{"name": "pick_color", "arguments": {"prompt": "one"}, "id": "call_1"}]},
    {"TEXT": "Thanks for the color."},
]


@pytest.fixture
def atomic_requests(monkeypatch):
    """The host wraps every view in a transaction of each of its databases (Django's ATOMIC_REQUESTS)."""
    for alias in connections:
        monkeypatch.setitem(connections[alias].settings_dict, "ATOMIC_REQUESTS", True)


async def _run_of(session_id: str) -> Run:
    return await Run.objects.filter(session_id=session_id).order_by("-created_at").afirst()


async def test_a_stop_under_atomic_requests_ends_the_run_at_once(settings, atomic_requests, jwt_user):
    settings.HELIX = {**settings.HELIX, **agent_settings(TEXT=" ".join(f"w{i}" for i in range(400)), PACE_TPS=50)}
    _user, auth = jwt_user
    sid = new_session_id()
    from tests.host.asgi import application

    send = HttpCommunicator(
        application, "POST", f"/helix/api/sessions/{sid}/chat", body=send_body(sid), headers=[HOST, auth, JSON]
    )
    await send.send_input({"type": "http.request", "body": send_body(sid), "more_body": False})
    body = b""
    while b"text-delta" not in body:
        body += (await send.receive_output(10)).get("body", b"")
    run = await _run_of(sid)

    started = asyncio.get_running_loop().time()
    status, _headers, answer = await call("POST", f"/helix/api/sessions/{sid}/runs/{run.id}/cancel", [HOST, auth])
    waited = asyncio.get_running_loop().time() - started

    assert status == 200, answer
    assert json.loads(answer)["status"] == "cancelled"
    assert waited < 10, waited  # it answered once the run ended, not after a lock timeout (15 s before)
    while True:
        message = await send.receive_output(10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    assert b'"type":"abort"' in body.replace(b" ", b"") and body.rstrip().endswith(b"data: [DONE]")
    assert (await _run_of(sid)).status == RunStatus.CANCELLED


async def test_a_client_tools_result_under_atomic_requests_continues_the_run(settings, atomic_requests, jwt_user):
    settings.HELIX = {**settings.HELIX, **agent_settings(tools=["pick_color"], STEPS=CLIENT_TOOL_STEPS)}
    _user, auth = jwt_user
    sid = new_session_id()
    status, _headers, answer = await call("POST", f"/helix/api/sessions/{sid}/chat", [HOST, auth, JSON], send_body(sid))
    assert status == 200 and b"tool-input-available" in answer
    run = await _run_of(sid)
    assert run.status == RunStatus.SUSPENDED_CLIENT_TOOL

    result = json.dumps({"results": [{"toolCallId": "call_1", "output": {"color": "red"}}]}).encode()
    path = f"/helix/api/sessions/{sid}/runs/{run.id}/tool-results"
    status, _headers, answer = await call("POST", path, [HOST, auth, JSON], result)

    assert status == 200, answer
    assert json.loads(answer)["continued"] is True
    for _ in range(100):
        latest = await _run_of(sid)
        if latest.status == RunStatus.COMPLETED:
            break
        await asyncio.sleep(0.05)
    assert latest.id != run.id and latest.status == RunStatus.COMPLETED


@pytest.mark.parametrize("route", ["sessions/{sid}/chat", "chat"], ids=["chat", "ai-sdk-chat"])
async def test_login_required_middleware_lets_a_token_caller_through(settings, jwt_user, route):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, LOGIN_REQUIRED]
    _user, auth = jwt_user
    sid = new_session_id()
    path = "/helix/api/" + route.format(sid=sid)
    status, headers, answer = await call("POST", path, [HOST, auth, JSON], send_body(sid))
    assert status == 200, (status, headers.get(b"location"), answer[:200])
    assert answer.rstrip().endswith(b"data: [DONE]")


@pytest.mark.parametrize("method", ["POST", "GET"])
async def test_login_required_middleware_leaves_an_anonymous_caller_the_typed_401(settings, method):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, LOGIN_REQUIRED]
    sid = new_session_id()
    body = send_body(sid) if method == "POST" else b""
    status, headers, answer = await call(method, f"/helix/api/sessions/{sid}/chat", [HOST, JSON], body)
    assert status == 401, (status, headers.get(b"location"))
    assert json.loads(answer)["code"] == "auth_not_authenticated"
