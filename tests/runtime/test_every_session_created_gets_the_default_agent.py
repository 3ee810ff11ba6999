"""A new session's agent is ``HELIX["DEFAULT_AGENT"]``, however the session is created (docs/configuration.md).

Found by a new user (seventeenth session): the setting was read only when a session named no
agent, and every session named one: the model's field and the store hard-coded ``"default"``.
With ``DEFAULT_AGENT: "support"`` the answer came from the agent named ``default``; with
only a ``support`` agent defined, every send was refused ``agent_unknown``.
"""

from __future__ import annotations

import json

import pytest
from channels.testing import ApplicationCommunicator
from django.test import override_settings

from helix_django import store
from helix_django.conf import helix_settings
from helix_django.models import ChatSession, Run
from tests.transport.conftest import new_session_id, send_body, user_message
from tests.transport.test_thread_hops_per_resume_open import _scope, _token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

JSON = [(b"content-type", b"application/json")]


def _agent(text: str) -> dict:
    return {
        "PROVIDER": {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider", "OPTIONS": {"TEXT": text}},
        "MODEL": "scripted-1",
    }


async def _send(session_id: str, key: str) -> str:
    """POST one chat message through the ASGI application; return the body."""
    from tests.asgi import application

    path = f"/helix/api/sessions/{session_id}/chat"
    communicator = ApplicationCommunicator(application, _scope("POST", path, key, JSON))
    body = json.dumps(send_body(session_id, [user_message("hi")])).encode()
    await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await communicator.receive_output(10)
    chunks = []
    while True:
        message = await communicator.receive_output(10)
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    assert start["status"] == 200, b"".join(chunks)
    return b"".join(chunks).decode()


@pytest.mark.parametrize("agents", ["default and support", "support only"])
async def test_a_chats_first_send_is_answered_by_the_default_agent(agents):
    configured = {"support": _agent("I am the support agent")}
    if agents == "default and support":
        configured["default"] = _agent("I am the default agent")
    key = await _token()
    sid = new_session_id()
    with override_settings(HELIX={**helix_settings.user_settings, "AGENTS": configured, "DEFAULT_AGENT": "support"}):
        body = await _send(sid, key)
    assert "support" in "".join(
        json.loads(line[6:]).get("delta", "") for line in body.splitlines() if line.startswith("data: {")
    )
    assert (await ChatSession.objects.aget(pk=sid)).agent == "support"
    assert (await Run.objects.filter(session_id=sid).afirst()).agent == "support"


def test_sessions_created_elsewhere_get_the_default_agent_too():
    with override_settings(HELIX={**helix_settings.user_settings, "DEFAULT_AGENT": "support"}):
        created, _ = store.get_or_create_session(new_session_id())
        unsaved = ChatSession(id=new_session_id())
        named, _ = store.get_or_create_session(new_session_id(), agent="billing")
    assert (created.agent, unsaved.agent, named.agent) == ("support", "support", "billing")
    assert ChatSession(id=new_session_id()).agent == "default"  # the setting's own default
