"""A budget holds across processes: what a user spent through one server is counted by the other.

Two daphne processes on one database (embedded executor, channels_redis layer), HELIX
``UserTokenBudget`` at 100 tokens a day and the scripted model (10 input tokens and one
output token per word: 71 per answer). The user's two answers run on process A; their third
send, to process B, is refused ``429 budget_exceeded`` (scope ``user``, ``Retry-After``)
before the model is called, and stores nothing; another user's send on B runs. The budget
reads the durable ``Run.usage`` rows, not a process's memory (helix_django/budgets.py).
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from helix_django.models import Message, Run
from helix_django.testing import read_sse, send_body, user_message
from tests.transport.conftest import REPLY, agent_settings

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

PREFIX = "/helix/api"
HELIX = {
    **agent_settings(TEXT=REPLY),
    "BUDGET_CLASSES": ["helix_django.budgets.UserTokenBudget"],
    "BUDGET_RATES": {"user": "100/day"},
}


@pytest.fixture
def pair(daphne_server_factory, scale_env):
    env = dict(scale_env)
    env.pop("HELIX_TEST_STREAM_PREFIX")  # the database stream manager
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": env}
    return daphne_server_factory(**kwargs), daphne_server_factory(**kwargs)


def send(client: httpx.Client, server, sid: str, text: str):
    url = server.url(f"{PREFIX}/sessions/{sid}/chat")
    return read_sse(client, "POST", url, json=send_body(sid, [user_message(text)]))


def test_what_a_user_spent_on_one_process_is_refused_on_the_other(pair, user_headers, django_user_model):
    a, b = pair
    sid = f"s_{uuid.uuid4().hex[:12]}"
    token = {"Authorization": user_headers["Authorization"]}
    with httpx.Client(headers=token, timeout=30) as client:
        for text in ("one", "two"):
            answered = send(client, a, sid, text)
            assert answered.status == 200 and answered.done, answered
        spent = sum(r.usage["inputTokens"] + r.usage["outputTokens"] for r in Run.objects.filter(session_id=sid))
        assert spent >= 100
        stored = Message.objects.filter(session_id=sid).count()
        refused = client.post(b.url(f"{PREFIX}/sessions/{sid}/chat"), json=send_body(sid, [user_message("three")]))
    assert refused.status_code == 429, refused.text
    body = refused.json()
    assert (body["code"], body["scope"]) == ("budget_exceeded", "user")
    assert int(refused.headers["Retry-After"]) > 0
    assert Message.objects.filter(session_id=sid).count() == stored
    assert Run.objects.filter(session_id=sid).count() == 2

    from rest_framework.authtoken.models import Token

    other = django_user_model.objects.create_user(username=f"other-{uuid.uuid4().hex[:8]}", password="pw-not-secret")
    other_token = {"Authorization": f"Token {Token.objects.create(user=other).key}"}
    with httpx.Client(headers=other_token, timeout=30) as client:
        answered = send(client, b, f"s_{uuid.uuid4().hex[:12]}", "mine")
    assert answered.status == 200 and answered.done, answered
