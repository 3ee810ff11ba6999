"""A message sent while an answer streams: refused (``reject``) or the answer stopped for it (``interrupt``).

Over a real daphne server: the strategy comes from the request (header
``X-Helix-Multitask``, body field ``multitask``, WebSocket ``send`` frame) or the agent's
``MULTITASK`` setting; an unknown value is a typed 400 that stores nothing.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from helix_django.models import LIVE_STATUSES, ChatSession, Message, Run
from tests.streams.conftest import BACKENDS, redis_options
from tests.transport.conftest import (
    REPLY,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def server(request, django_db_setup, django_db_blocker):
    """On each stream manager: the default agent rejects (no setting); agent ``interrupting`` interrupts.

    Replies at 150 words/s.
    """
    from tests.live import LiveServer

    backend = dict(BACKENDS[request.param])
    if request.param == "redis":
        backend["OPTIONS"] = redis_options()
    helix = {**agent_settings(TEXT=REPLY, PACE_TPS=150), "STREAM_MANAGERS": {"default": backend}}
    helix["AGENTS"]["interrupting"] = {**helix["AGENTS"]["default"], "MULTITASK": "interrupt"}
    with django_db_blocker.unblock():
        live = LiveServer(helix=helix)
        live.start()
    yield live
    live.stop()


@pytest.fixture
def client(users, server):
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client
    for _ in range(300):  # the next test's flush never races a run left going
        if not Run.objects.filter(status__in=LIVE_STATUSES).exists():
            return
        time.sleep(0.02)


def start_answer(client, server, sid, first):
    """Send ``first`` and leave its answer streaming (two events read)."""
    started = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]), stop_after=2)
    assert started.status == 200
    return Run.objects.get(session_id=sid)


def wait_ended(sid, *, runs=2):
    for _ in range(400):
        if (
            Run.objects.filter(session_id=sid).count() >= runs
            and not Run.objects.filter(session_id=sid, status__in=LIVE_STATUSES).exists()
        ):
            return
        time.sleep(0.02)
    raise AssertionError("the session's runs did not end")


def assert_interrupted(sid, first_run, result):
    """The follow-up's stream is the new run's whole answer; the first run ended as a Stop by the follow-up."""
    assert result.status == 200 and result.done and result.text == REPLY
    wait_ended(sid)
    interrupted = Run.objects.get(pk=first_run.id)
    follow_up = Run.objects.exclude(pk=first_run.id).get(session_id=sid)
    assert (interrupted.status, interrupted.cancelled_by) == ("cancelled", "follow_up")
    assert (interrupted.recovery_action, interrupted.resolved_by) == ("interrupted_by_follow_up", follow_up.id)
    assert follow_up.status == "completed"
    partial = Message.objects.get(session_id=sid, ui_id=interrupted.response_message_id, position__isnull=False)
    text = "".join(p.get("text", "") for p in partial.parts)
    assert text and REPLY.startswith(text) and text != REPLY  # kept, cut short
    assert (
        partial.metadata["helix"]["status"] == "cancelled" and partial.metadata["helix"]["cancelledBy"] == "follow_up"
    )
    roles = list(
        Message.objects.filter(session_id=sid, position__isnull=False)
        .order_by("position")
        .values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "user", "assistant"]


def test_the_header_interrupt_stops_the_live_answer_keeps_its_partial_and_answers_the_follow_up(server, client):
    sid = new_session_id()
    first = user_message("one")
    run = start_answer(client, server, sid, first)
    follow = read_sse(
        client,
        "POST",
        chat_url(server, sid),
        json=send_body(sid, [first, user_message("two")]),
        headers={"X-Helix-Multitask": "interrupt"},
    )
    assert_interrupted(sid, run, follow)


def test_the_body_field_interrupt_does_the_same(server, client):
    sid = new_session_id()
    first = user_message("one")
    run = start_answer(client, server, sid, first)
    body = {**send_body(sid, [first, user_message("two")]), "multitask": "interrupt"}
    assert_interrupted(sid, run, read_sse(client, "POST", chat_url(server, sid), json=body))


def test_an_agent_set_to_interrupt_interrupts_without_asking(server, client, users):
    sid = new_session_id()
    ChatSession.objects.create(id=sid, owner=users["a"][0], agent="interrupting")
    first = user_message("one")
    run = start_answer(client, server, sid, first)
    assert_interrupted(
        sid, run, read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first, user_message("two")]))
    )


def test_the_websocket_send_interrupts_when_asked(server, client, users):
    from websockets.sync.client import connect

    sid = new_session_id()
    first = user_message("one")
    run = start_answer(client, server, sid, first)
    url = f"{server.ws_base_url}/ws/helix/api/sessions/{sid}/"
    with connect(url, additional_headers=users["a"][1]) as ws:
        ws.send(json.dumps({"type": "send", "messages": [first, user_message("two")], "multitask": "interrupt"}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "run", frame
    wait_ended(sid)
    interrupted = Run.objects.get(pk=run.id)
    assert (interrupted.status, interrupted.cancelled_by, interrupted.recovery_action) == (
        "cancelled",
        "follow_up",
        "interrupted_by_follow_up",
    )


def test_reject_stays_the_default_and_stores_nothing(server, client):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    for headers in ({}, {"X-Helix-Multitask": "reject"}):
        busy = read_sse(
            client, "POST", chat_url(server, sid), json=send_body(sid, [first, user_message("two")]), headers=headers
        )
        assert busy.status == 409 and busy.body["code"] == "state_already_running"
    assert Message.objects.filter(session_id=sid, role="user").count() == 1


@pytest.mark.parametrize(
    "headers,extra",
    [({"X-Helix-Multitask": "queue-it"}, {}), ({}, {"multitask": "later"}), ({}, {"multitask": 3})],
)
def test_an_unknown_strategy_is_a_typed_400_that_stores_nothing(server, client, headers, extra):
    sid = new_session_id()
    body = {**send_body(sid, [user_message("one")]), **extra}
    refused = read_sse(client, "POST", chat_url(server, sid), json=body, headers=headers)
    assert refused.status == 400
    assert refused.body == {
        "error": refused.body["error"],
        "code": "validation_error",
        "cause": "multitask",
        "allowed": ["reject", "interrupt", "enqueue"],
        "retryable": False,
    }
    assert not ChatSession.objects.filter(pk=sid).exists()
