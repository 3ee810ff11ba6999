"""A follow-up with ``interrupt`` sent to another process than the one executing the live answer.

Two daphne processes (embedded executor, channels_redis layer; the database and the
Redis stream managers alike). The answer streams on A; the follow-up, with
``X-Helix-Multitask: interrupt``, reaches B, which executes no task for the run: B stops
it as a Stop served there does (the writer fenced, the partial rebuilt from the stream,
``cancelled_by: follow_up``), then starts the new turn. A's send ends as a Stop's
(``abort`` + ``[DONE]``) with exactly the text kept; B's response is the new run's whole
answer; one run is live at a time and the interrupted run names the one that followed.
"""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from helix_django.models import Message, Run
from tests.scale.test_a_stop_on_another_process_keeps_the_text_the_user_saw import _follow
from tests.transport.conftest import read_sse, wait_for_run_status

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

PREFIX = "/helix/api"
REPLY = " ".join(f"w{i}" for i in range(600))
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": REPLY, "PACE_TPS": 200},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "FLUSH_INTERVAL_MS": 2,
}


@pytest.fixture(params=["database", "redis"])
def pair(request, daphne_server_factory, scale_env):
    env = dict(scale_env)
    if request.param == "database":
        env.pop("HELIX_TEST_STREAM_PREFIX")
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": env}
    return daphne_server_factory(**kwargs), daphne_server_factory(**kwargs)


def _message(text):
    return {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_a_follow_up_on_another_process_stops_the_answer_there_and_answers_at_once(pair, user_headers):
    a, b = pair
    token = {"Authorization": user_headers["Authorization"]}
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    url = f"{PREFIX}/sessions/{sid}/chat"
    first = _message("go")
    seen = {}

    def send():
        with httpx.Client(headers=token, timeout=30) as client:
            body = {"id": sid, "messages": [first], "trigger": "submit-message"}
            seen["a"] = _follow(client, "POST", a.url(url), json=body)

    sender = threading.Thread(target=send)
    sender.start()
    run = wait_for_run_status(sid)
    assert run is not None and run.status == "streaming"
    with httpx.Client(headers=token, timeout=30) as client:
        body = {"id": sid, "messages": [first, _message("stop, answer this")], "trigger": "submit-message"}
        follow = read_sse(client, "POST", b.url(url), json=body, headers={"X-Helix-Multitask": "interrupt"})
    sender.join(30)

    assert follow.status == 200 and follow.done and follow.text == REPLY
    interrupted = Run.objects.get(pk=run.id)
    follow_up = Run.objects.exclude(pk=run.id).get(session_id=sid)
    assert (interrupted.status, interrupted.cancelled_by) == ("cancelled", "follow_up")
    assert (interrupted.recovery_action, interrupted.resolved_by) == ("interrupted_by_follow_up", follow_up.id)
    assert follow_up.status == "completed"
    kept = Message.objects.get(session_id=sid, ui_id=interrupted.response_message_id, position__isnull=False)
    text, ending = seen["a"]
    assert ending == ['{"type":"abort"}', "[DONE]"]
    assert 0 < len(kept.text) < len(REPLY) and kept.text == text
