"""A message sent while an answer streams: refused (``reject``) or the answer stopped for it (``interrupt``).

Over a real daphne server: the strategy comes from the request (header
``X-Helix-Multitask``, body field ``multitask``, WebSocket ``send`` frame) or the agent's
``MULTITASK`` setting; an unknown value is a typed 400 that stores nothing.
"""

from __future__ import annotations

import json
import time

import pytest

from helix_django.models import LIVE_STATUSES, ChatSession, Message, Run
from tests.streams.conftest import BACKENDS
from tests.transport.conftest import (
    REPLY,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    user_message,
)
from tests.transport.multitask_site import multitask_server, settled_client, start_answer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def server(request, django_db_setup, django_db_blocker):
    """On each stream manager: the default agent rejects; agent ``interrupting`` uses ``interrupt``. 150 words/s."""
    with django_db_blocker.unblock():
        live = multitask_server(request.param, pace_tps=150, agent="interrupting", strategy="interrupt")
    yield live
    live.stop()


@pytest.fixture
def client(users, server):
    yield from settled_client(users["a"][1])


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
