"""A replay-prefix resume of an earlier message ends as that message's run ended, not as the current run.

Seen: ``GET sessions/<id>/chat`` with ``X-Existing-Message-Id`` = the completed answer of
turn 1 and ``X-Helix-Replay-Prefix: 1`` (a client re-attaching to the answer it was
streaming when its connection dropped, while turn 2 was sent from another tab) replayed
that answer's committed parts and then ended with the *current* run's ending: turn 2's
``provider_error`` when turn 2 had failed, a retryable ``transport_stream_drop``
(``reader_ended``) when turn 2 was live or waited for a client tool (the client
re-attaches to the same answer and gets the same drop, until it gives up), a
``run_cancelled`` error chunk when turn 2 was stopped. Expected: the replay of a committed
answer that no live run writes ends as its own run ended (docs/transport.md, "Endings"):
``[DONE]`` for a completed one.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from helix_django.models import Run
from tests.transport.conftest import agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PREFIX = "/helix/api"
RULES = [
    {"MATCH": "^fail", "TEXT": "one two three four five six", "FAIL_AFTER_CHUNKS": 3},
    {"MATCH": "^hang", "TEXT": "one two three four five six", "HANG_AFTER_CHUNKS": 3},
    {"MATCH": "^tool", "TOOL_CALLS": [{"name": "pick_color", "arguments": {"prompt": "p"}}]},
]


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    from tests.live import LiveServer

    with django_db_blocker.unblock():
        live = LiveServer(helix=agent_settings(tools=["pick_color"], TEXT="The first answer, complete.", RULES=RULES))
        live.start()
    yield live
    live.stop()


def latest_run(sid: str) -> Run:
    return Run.objects.filter(session_id=sid).order_by("-created_at").first()


def wait_for(sid: str, statuses: set[str]) -> Run:
    for _ in range(500):
        run = latest_run(sid)
        if run is not None and run.status in statuses:
            return run
        time.sleep(0.02)
    raise AssertionError(f"the run of {sid} is {run.status if run else None}")


@pytest.mark.parametrize(
    ("second", "second_status"),
    [("fail", "failed"), ("hang", "streaming"), ("tool", "suspended_client_tool"), ("stop", "cancelled")],
)
def test_the_replay_of_a_completed_earlier_answer_ends_done(server, users, second, second_status):
    headers = users["a"][1]
    sid = new_session_id()
    with httpx.Client(headers=headers, timeout=15) as client:
        first = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hello")]))
        assert first.done
        answered = wait_for(sid, {"completed"})
        history = client.get(server.url(f"{PREFIX}/sessions/{sid}/snapshot")).json()["messages"]
        body = send_body(sid, [*history, user_message("hang" if second == "stop" else second)])
        sender = threading.Thread(
            target=read_sse,
            args=(httpx.Client(headers=headers, timeout=15), "POST", chat_url(server, sid)),
            kwargs={"json": body},
        )
        sender.start()
        current = wait_for(sid, {"streaming", "failed", "suspended_client_tool"})
        if second in ("hang", "stop"):
            time.sleep(0.3)
        if second == "stop":
            assert client.post(server.url(f"{PREFIX}/sessions/{sid}/runs/{current.id}/cancel")).status_code == 200
        assert wait_for(sid, {second_status}).id != answered.id
        resume = {
            "X-Existing-Message-Id": answered.response_message_id,
            "X-Helix-Replay-Prefix": "1",
            "X-Resume-From-Sequence": str(answered.start_sequence + 2),
        }
        told = read_sse(client, "GET", chat_url(server, sid), headers=resume)
        if second == "hang":
            client.post(server.url(f"{PREFIX}/sessions/{sid}/runs/{current.id}/cancel"))
        sender.join(15)
    assert told.status == 200
    assert told.text == "The first answer, complete."
    assert told.done, [e.data for e in told.events[-2:]]
    assert not any(c["type"] in ("error", "abort") for c in told.chunks)
