"""A message sent while an answer streams is queued (multitask ``enqueue``) and starts when the answer ends.

Over a real daphne server on each stream manager: the send is answered ``202`` with the
queued message at once; the snapshot lists it; when the live run ends it starts as a
send of its own, the finished answer before it in the conversation; a keyed repeat
returns the same queued message; its owner may take it back before it starts.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from helix_django.models import LIVE_STATUSES, ChatSession, Message, QueuedMessage, Run
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

ENQUEUE = {"X-Helix-Multitask": "enqueue"}


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def server(request, django_db_setup, django_db_blocker):
    """On each stream manager: the default agent rejects; agent ``queueing`` uses ``enqueue``. 60 words/s."""
    with django_db_blocker.unblock():
        live = multitask_server(request.param, pace_tps=60, agent="queueing", strategy="enqueue")
    yield live
    live.stop()


@pytest.fixture
def client(users, server):
    yield from settled_client(users["a"][1])


def api_url(server, sid, rest=""):
    return server.url(f"/helix/api/sessions/{sid}/{rest}")


def queue(client, server, sid, messages, *, headers=ENQUEUE, key=None):
    extra = {"X-Helix-Request-Key": key} if key else {}
    return client.post(chat_url(server, sid), json=send_body(sid, messages), headers={**headers, **extra})


def wait_runs_ended(sid, runs):
    for _ in range(600):
        if (
            Run.objects.filter(session_id=sid).count() >= runs
            and not Run.objects.filter(session_id=sid, status__in=LIVE_STATUSES).exists()
        ):
            return list(Run.objects.filter(session_id=sid).order_by("created_at"))
        time.sleep(0.02)
    raise AssertionError("the session's runs did not end")


def conversation(sid):
    rows = Message.objects.filter(session_id=sid, position__isnull=False).order_by("position")
    return [(row.role, "".join(p.get("text", "") for p in row.parts)) for row in rows]


def test_a_queued_message_is_answered_202_listed_and_answered_after_the_live_answer(server, client):
    sid = new_session_id()
    first = user_message("one")
    live = start_answer(client, server, sid, first)
    second = user_message("two")
    answer = queue(client, server, sid, [first, second])
    assert answer.status_code == 202, answer.text
    queued = answer.json()["queued"]
    assert queued["messageId"] == second["id"] and queued["position"] == 1 and queued["runId"] == live.id
    assert queued["duplicate"] is False
    snapshot = client.get(api_url(server, sid, "snapshot")).json()
    assert [m["queuedMessageId"] for m in snapshot.get("queuedMessages", [])] in ([queued["queuedMessageId"]], [])
    first_run, follow_up = wait_runs_ended(sid, 2)
    assert (first_run.id, first_run.status) == (live.id, "completed")  # never stopped for the follow-up
    assert follow_up.status == "completed"
    assert conversation(sid) == [("user", "one"), ("assistant", REPLY), ("user", "two"), ("assistant", REPLY)]
    row = QueuedMessage.objects.get(pk=queued["queuedMessageId"])
    assert (row.status, row.run_id) == ("started", follow_up.id)
    assert "queuedMessages" not in client.get(api_url(server, sid, "snapshot")).json()


def test_the_snapshot_lists_waiting_messages_oldest_first(server, client):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    ids = [queue(client, server, sid, [first, user_message(text)]).json()["queued"] for text in ("two", "three")]
    assert [q["position"] for q in ids] == [1, 2]
    waiting = client.get(api_url(server, sid, "snapshot")).json()["queuedMessages"]
    assert [m["queuedMessageId"] for m in waiting] == [q["queuedMessageId"] for q in ids]
    assert [m["parts"][0]["text"] for m in waiting] == ["two", "three"]
    wait_runs_ended(sid, 3)
    assert [text for role, text in conversation(sid) if role == "user"] == ["one", "two", "three"]


def test_a_keyed_repeat_returns_the_same_queued_message_and_another_text_is_a_conflict(server, client):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    second = user_message("two")
    one = queue(client, server, sid, [first, second], key="key-queued-0001")
    again = queue(client, server, sid, [first, second], key="key-queued-0001")
    assert (one.status_code, again.status_code) == (202, 202)
    assert again.json()["queued"]["queuedMessageId"] == one.json()["queued"]["queuedMessageId"]
    assert again.json()["queued"]["duplicate"] is True
    other = queue(client, server, sid, [first, user_message("other", second["id"])], key="key-queued-0001")
    assert other.status_code == 409 and other.json()["code"] == "state_request_key_conflict"
    assert QueuedMessage.objects.filter(session_id=sid).count() == 1
    wait_runs_ended(sid, 2)
    assert [text for role, text in conversation(sid) if role == "user"] == ["one", "two"]


def test_a_message_taken_back_before_it_starts_never_runs(server, client, users):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    queued = queue(client, server, sid, [first, user_message("two")]).json()["queued"]
    url = api_url(server, sid, f"queued/{queued['queuedMessageId']}")
    with httpx.Client(headers=users["b"][1], timeout=10) as stranger:
        assert stranger.delete(url).json()["code"] == "state_session_not_found"
    assert client.delete(url).status_code == 204
    again = client.delete(url)
    assert (again.status_code, again.json()["code"], again.json()["cause"]) == (
        409,
        "state_queued_message_not_queued",
        "removed",
    )
    unknown = client.delete(api_url(server, sid, "queued/qm_unknown"))
    assert (unknown.status_code, unknown.json()["code"]) == (404, "state_queued_message_not_found")
    (only,) = wait_runs_ended(sid, 1)
    time.sleep(0.3)  # a start would have begun at the run's end
    assert Run.objects.filter(session_id=sid).count() == 1
    assert [text for role, text in conversation(sid) if role == "user"] == ["one"]


def test_a_message_that_started_cannot_be_taken_back(server, client):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    queued = queue(client, server, sid, [first, user_message("two")]).json()["queued"]
    _first_run, follow_up = wait_runs_ended(sid, 2)
    late = client.delete(api_url(server, sid, f"queued/{queued['queuedMessageId']}"))
    assert late.status_code == 409
    assert (late.json()["cause"], late.json()["runId"]) == ("started", follow_up.id)


def test_an_agent_set_to_enqueue_queues_without_asking_and_the_body_field_asks_too(server, client, users):
    sid = new_session_id()
    ChatSession.objects.create(id=sid, owner=users["a"][0], agent="queueing")
    first = user_message("one")
    start_answer(client, server, sid, first)
    assert queue(client, server, sid, [first, user_message("two")], headers={}).status_code == 202
    other = new_session_id()
    start_answer(client, server, other, first)
    body = {**send_body(other, [first, user_message("two")]), "multitask": "enqueue"}
    assert client.post(chat_url(server, other), json=body).status_code == 202
    wait_runs_ended(sid, 2)
    wait_runs_ended(other, 2)


def test_an_edit_is_never_queued(server, client):
    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    body = {**send_body(sid, [user_message("one, edited", first["id"])]), "messageId": first["id"]}
    refused = client.post(chat_url(server, sid), json=body, headers=ENQUEUE)
    assert (refused.status_code, refused.json()["code"]) == (409, "state_already_running")
    assert not QueuedMessage.objects.filter(session_id=sid).exists()


def test_the_websocket_send_queues_when_asked(server, client, users):
    from websockets.sync.client import connect

    sid = new_session_id()
    first = user_message("one")
    start_answer(client, server, sid, first)
    url = f"{server.ws_base_url}/ws/helix/api/sessions/{sid}/"
    with connect(url, additional_headers=users["a"][1]) as ws:
        ws.send(json.dumps({"type": "send", "messages": [first, user_message("two")], "multitask": "enqueue"}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "queued" and frame["queued"]["position"] == 1, frame
    wait_runs_ended(sid, 2)
    assert [text for role, text in conversation(sid) if role == "user"] == ["one", "two"]


def test_an_interrupting_send_goes_first_and_the_queued_message_follows_its_answer(server, client):
    sid = new_session_id()
    first = user_message("one")
    live = start_answer(client, server, sid, first)
    assert queue(client, server, sid, [first, user_message("queued")]).status_code == 202
    interrupting = read_sse(
        client,
        "POST",
        chat_url(server, sid),
        json=send_body(sid, [first, user_message("now")]),
        headers={"X-Helix-Multitask": "interrupt"},
    )
    assert interrupting.status == 200 and interrupting.done and interrupting.text == REPLY
    runs = wait_runs_ended(sid, 3)
    assert [(r.id == live.id, r.status) for r in runs] == [
        (True, "cancelled"),
        (False, "completed"),
        (False, "completed"),
    ]
    assert [text for role, text in conversation(sid) if role == "user"] == ["one", "now", "queued"]
