"""The chat route over a real daphne server: sends, drops, resumes, replay prefix, keyed duplicates."""

from __future__ import annotations

import time

import httpx
import pytest

from helix_django.models import Message, Run
from helix_django.protocol import MessageAccumulator
from tests.transport.conftest import (
    PREFIX,
    REPLY,
    TWO_STEPS,
    agent_settings,
    chat_url,
    new_session_id,
    read_sse,
    send_body,
    snapshot_after_first_step,
    user_message,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(shared_server):
    """The module's server: the scripted reply streams at 150 words/s (about 0.4 s per reply).

    Runs a test leaves going are waited for, so the next test's database flush never races them.
    """
    yield shared_server
    from helix_django.models import LIVE_STATUSES

    for _ in range(300):
        if not Run.objects.filter(status__in=LIVE_STATUSES).exists():
            return
        time.sleep(0.02)


@pytest.fixture
def client(users):
    with httpx.Client(headers=users["a"][1], timeout=10) as client:
        yield client


def snapshot(client, server, session_id):
    response = client.get(server.url(f"{PREFIX}/sessions/{session_id}/snapshot"))
    assert response.status_code == 200
    return response.json()


def wait_finished(client, server, session_id):
    for _ in range(200):
        snap = snapshot(client, server, session_id)
        if snap["status"] in ("ended", "failed"):
            return snap
        time.sleep(0.05)
    raise AssertionError("run did not finish")


def committed_reply(session_id: str) -> dict:
    row = Message.objects.filter(session_id=session_id, role="assistant", position__isnull=False).order_by("-position")[
        0
    ]
    return row.to_ui_message()


def test_send_streams_the_new_run_with_sequence_ids(server, client):
    sid = new_session_id()
    result = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hello")]))
    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    assert result.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert "no-store" in result.headers["cache-control"]
    assert result.headers["x-accel-buffering"] == "no"
    ids = [int(e.id) for e in result.events if e.id]
    assert ids == sorted(set(ids)) and len(ids) == len(result.chunks)
    assert result.done
    reply = committed_reply(sid)
    assert result.chunks[0] == {"type": "start", "messageId": reply["id"]}
    assert result.chunks[-1]["type"] == "finish"
    assert result.text == REPLY == "".join(p["text"] for p in reply["parts"] if p["type"] == "text")
    assert not any(c["type"].startswith("helix-") or any(k.startswith("_") for k in c) for c in result.chunks)
    acc = MessageAccumulator("")
    for chunk in result.chunks:
        acc.apply(chunk)
    assert acc.snapshot() == reply


def test_second_turn_streams_only_its_own_run(server, client):
    sid = new_session_id()
    first = user_message("one")
    r1 = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]))
    wait_finished(client, server, sid)
    history = [first, committed_reply(sid), user_message("two")]
    r2 = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, history))
    assert r2.done and r2.text == REPLY
    assert min(int(e.id) for e in r2.events if e.id) > r1.last_id
    assert r2.chunks[0]["messageId"] == committed_reply(sid)["id"] != history[1]["id"]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("header", ["Last-Event-ID", "X-Resume-From-Sequence"])
def test_drop_and_resume_renders_the_reply_exactly_once(server, client, where, header):
    sid = new_session_id()
    # Sequenced frames: start, start-step, text-start, the deltas, text-end, finish-step, finish.
    # The writer merges deltas that wait for one commit (COALESCE_DELTAS), so a loaded server
    # sends fewer deltas than the reply has words: "middle" drops right after the first delta,
    # which always leaves text-end and the finish unread; "last" reads past every frame.
    k = {"first": 1, "middle": 4, "last": 4 + len(REPLY.split()) + 3}[where]
    dropped = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=k)
    assert not dropped.done or where == "last"
    cursor = dropped.last_id
    resumed = read_sse(client, "GET", chat_url(server, sid), headers={header: str(cursor)})
    reply = committed_reply(sid) if resumed.status == 200 else None
    if resumed.status == 204:  # nothing after the cursor: the drop came after the terminal
        assert where == "last"
        assert dropped.text == REPLY
        return
    assert resumed.status == 200 and resumed.done
    assert all(int(e.id) > cursor for e in resumed.events if e.id)
    assert not any(c["type"] == "start" for c in resumed.chunks)  # a cursor never repeats start
    assert dropped.text + resumed.text == REPLY
    acc = MessageAccumulator("")
    for chunk in dropped.chunks + resumed.chunks:
        acc.apply(chunk)
    assert acc.snapshot() == reply


def test_resume_without_cursor_replays_the_live_run_from_its_start(server, client):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=2)
    resumed = read_sse(client, "GET", chat_url(server, sid))
    assert resumed.status == 200 and resumed.done
    assert resumed.chunks[0] == {"type": "start", "messageId": committed_reply(sid)["id"]}
    assert resumed.text == REPLY


def test_resume_after_finish(server, client):
    sid = new_session_id()
    sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    snap = wait_finished(client, server, sid)
    # No cursor, or a cursor at the end: nothing to resume (a start + finish would empty the message).
    assert read_sse(client, "GET", chat_url(server, sid)).status == 204
    assert read_sse(client, "GET", chat_url(server, sid), headers={"Last-Event-ID": str(sent.last_id)}).status == 204
    # A cursor inside the finished run: the rest of it and its terminal.
    middle = sent.events[10]
    rest = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": middle.id})
    assert rest.status == 200 and rest.done
    before = "".join(e.chunk.get("delta", "") for e in sent.events[:11] if e.chunk)
    assert before + rest.text == REPLY
    assert snap["status"] == "ended"


def test_stale_cursor_from_an_earlier_turn_is_clamped_to_the_run_start(server, client):
    sid = new_session_id()
    first = user_message("one")
    r1 = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]))
    wait_finished(client, server, sid)
    stale = r1.events[3].id
    history = [first, committed_reply(sid), user_message("two")]
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, history), stop_after=2)
    run = Run.objects.filter(session_id=sid).order_by("-created_at")[0]
    resumed = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": stale})
    assert resumed.status == 200 and resumed.done
    assert min(int(e.id) for e in resumed.events if e.id) > run.start_sequence
    assert resumed.chunks[0] == {"type": "start", "messageId": run.response_message_id}
    assert resumed.text == REPLY  # the second turn once, nothing of the first


def test_replay_prefix_resume_has_no_overlap_and_no_gap(daphne_server_factory, client):
    server = daphne_server_factory(helix=agent_settings(tools=["lookup"], STEPS=TWO_STEPS, PACE_TPS=150))
    sid = new_session_id()
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=6)
    snap = snapshot_after_first_step(client, server, sid)
    message_id = snap["resumeMessageId"]
    headers = {
        "X-Resume-From-Sequence": str(snap["streamSequence"]),
        "X-Existing-Message-Id": message_id,
        "X-Helix-Replay-Prefix": "1",
    }
    resumed = read_sse(client, "GET", chat_url(server, sid), headers=headers)
    assert resumed.status == 200 and resumed.done
    chunks = resumed.chunks
    assert chunks[0]["type"] == "start" and chunks[0]["messageId"] == message_id
    assert chunks[1] == {
        "type": "data-helix-replay",
        "data": {"phase": "begin", "messageId": message_id},
        "transient": True,
    }
    markers = [i for i, c in enumerate(chunks) if c["type"] == "data-helix-replay"]
    assert len(markers) == 2 and chunks[markers[1]]["data"]["phase"] == "end"
    assert [c["type"] for c in chunks].count("start") == 1
    prefix = chunks[: markers[1]]
    assert [c["type"] for c in prefix].count("tool-output-available") == 1  # the committed first step
    tail_ids = [int(e.id) for e in resumed.events if e.id]
    assert min(tail_ids) > snap["streamSequence"]  # the tail starts after the snapshot's cursor
    acc = MessageAccumulator("")
    for chunk in chunks:
        acc.apply(chunk)
    assert acc.snapshot() == committed_reply(sid)


def test_replay_prefix_with_an_unknown_message_id_is_409(server, client):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
    headers = {"X-Existing-Message-Id": "msg_nope", "X-Helix-Replay-Prefix": "1", "X-Resume-From-Sequence": "1"}
    result = read_sse(client, "GET", chat_url(server, sid), headers=headers)
    assert result.status == 409
    assert result.body == {
        "error": result.body["error"],
        "code": "state_not_resumable",
        "cause": "resume_message_unknown",
        "retryable": True,
    }


def test_keyed_duplicate_send_attaches_to_the_original_run(server, client):
    sid = new_session_id()
    message = user_message("hi")
    key = {"X-Helix-Request-Key": "key-0123456789"}
    first = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message]), headers=key, stop_after=3)
    again = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message]), headers=key)
    assert again.status == 200 and again.done
    assert again.chunks[0] == first.chunks[0]  # same start {messageId}
    assert again.text == REPLY
    assert Run.objects.filter(session_id=sid).count() == 1
    assert Message.objects.filter(session_id=sid, role="user").count() == 1
    # Finished and still the latest: the terminal replay of that run.
    wait_finished(client, server, sid)
    replay = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message]), headers=key)
    assert replay.status == 200 and replay.done and replay.text == REPLY
    # The same key for other input: 409 with the run id, nothing written.
    other = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("else")]), headers=key)
    assert other.status == 409
    assert other.body["code"] == "state_request_key_conflict" and other.body["runId"] == first_run_id(sid)
    assert Message.objects.filter(session_id=sid).count() == 2


def first_run_id(session_id):
    return Run.objects.filter(session_id=session_id).order_by("created_at")[0].id


def test_busy_send_is_409_and_writes_nothing(server, client):
    sid = new_session_id()
    first = user_message("one")
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]), stop_after=2)
    busy = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first, user_message("two")]))
    assert busy.status == 409
    assert busy.body == {"error": busy.body["error"], "code": "state_already_running", "retryable": True}
    assert Message.objects.filter(session_id=sid, role="user").count() == 1


def test_client_disconnect_does_not_stop_the_run(server, client):
    sid = new_session_id()
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=1)
    snap = wait_finished(client, server, sid)
    assert snap["status"] == "ended" and snap["runStatus"] == "completed"
    assert "".join(p.get("text", "") for p in snap["messages"][-1]["parts"]) == REPLY


def test_a_post_whose_user_message_is_already_committed_attaches_instead_of_sending(server, client):
    sid = new_session_id()
    message = user_message("hi")
    read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message]), stop_after=2)
    again = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message]))
    assert again.status == 200 and again.done and again.text == REPLY
    assert Run.objects.filter(session_id=sid).count() == 1
    wait_finished(client, server, sid)
    assert read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [message])).status == 204


def test_a_body_with_only_the_new_message_is_a_send(server, client):
    sid = new_session_id()
    bare = read_sse(client, "POST", chat_url(server, sid), json=user_message("first"))
    assert bare.status == 200 and bare.done and bare.text == REPLY
    wait_finished(client, server, sid)
    wrapped = read_sse(client, "POST", chat_url(server, sid), json={"message": user_message("second")})
    assert wrapped.status == 200 and wrapped.done and wrapped.text == REPLY
    wait_finished(client, server, sid)
    assert [m.role for m in Message.objects.filter(session_id=sid).order_by("position")] == [
        "user", "assistant", "user", "assistant",
    ]  # fmt: skip


def test_a_retried_attempt_is_dropped_from_replays(daphne_server_factory, client):
    server = daphne_server_factory(
        helix=agent_settings(
            max_attempts=2, TEXT=REPLY, PACE_TPS=40, FAIL_AFTER_CHUNKS=5, FAIL_RETRYABLE=True, FAIL_ATTEMPTS=1
        )
    )
    sid = new_session_id()
    live = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]), stop_after=14)
    # The live client saw the first attempt's words, then the switch.
    assert any(c["type"] == "data-attempt-superseded" for c in live.chunks)
    # A page reload (no cursor) replays only the attempt that won: the reply once, no resync trigger.
    replay = read_sse(client, "GET", chat_url(server, sid))
    assert replay.status == 200 and replay.done
    assert replay.text == REPLY
    assert not any(c["type"] == "data-attempt-superseded" for c in replay.chunks)
    # A resume whose cursor is past content of the superseded attempt keeps the trigger.
    first_delta = next(e for e in live.events if e.chunk and e.chunk.get("type") == "text-delta")
    resumed = read_sse(client, "GET", chat_url(server, sid), headers={"Last-Event-ID": first_delta.id})
    assert resumed.status == 200 and resumed.done
    assert [c["type"] for c in resumed.chunks].count("data-attempt-superseded") == 1
    assert resumed.text == REPLY  # the winning attempt in full (the client re-anchors on the trigger)
