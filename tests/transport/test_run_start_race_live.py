"""A chat-route request whose run-start compare-and-set loses, over daphne (002, "Wire errors", "Sends and conflicts").

A regenerate reads the session's current run, then commits its run start expecting that
run to still be current (``expected_current_run_id``). When a send of another process
commits in between, the regenerate must not start: 409 ``state_run_start_conflict``, and
nothing of it is written (no run, no truncate, no rows, no stream claim).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

from helix_django import store
from helix_django.models import ChatSession, Checkpoint, Message, Run, RunStatus
from helix_django.streams import get_stream_manager
from tests.transport.conftest import chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client(users):
    with httpx.Client(headers=users["a"][1], timeout=30) as client:
        yield client


def wait_until_parked_on_the_lock(thread: threading.Thread) -> None:
    """Give the request time to read the current run and park on the database lock held by this test.

    On PostgreSQL the parked backend is visible (``pg_stat_activity`` waiting on a lock); SQLite
    shows no waiter, so this waits a generous second (a request that had not read yet would
    read the competing run and be refused ``state_already_running``, failing the test loudly).
    """
    if connection.vendor != "postgresql":
        time.sleep(1.5)
        assert thread.is_alive(), "the regenerate was answered while the database was locked"
        return
    from django.db import connections

    # This test's own connection holds the lock inside its transaction: ask from another one.
    other = connections.create_connection("default")
    try:
        for _ in range(400):
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = %s",
                    [connection.settings_dict["NAME"]],
                )
                if cursor.fetchone()[0] >= 1:
                    return
            time.sleep(0.02)
    finally:
        other.close()
    raise AssertionError("the regenerate never waited for the session lock")


def test_a_regenerate_whose_run_start_compare_and_set_loses_is_409_run_start_conflict(daphne_server, client, users):
    """Two real run starts race on one session: the regenerate (over HTTP) loses to a send.

    No patch: the race is made deterministic with the database's own lock. This test takes
    the session's write lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the session row
    ``FOR UPDATE``), then the regenerate reads the current run and parks on that lock at
    its run-start commit. While it waits, this process commits a send's run start with the
    store (what another server process's send does), and releases the lock. The
    regenerate's compare-and-set then finds the current run moved.
    """
    server = daphne_server
    sid = new_session_id()
    first = user_message("first question")
    sent = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]))
    assert sent.status == 200 and sent.done
    first_run = Run.objects.get(session_id=sid)
    assert first_run.status == RunStatus.COMPLETED
    messages_before = list(Message.objects.filter(session_id=sid).values_list("ui_id", "position"))
    checkpoints_before = Checkpoint.objects.filter(session_id=sid).count()
    stream_before = async_to_sync(get_stream_manager().get_info)(sid)

    result: dict = {}
    body = {"id": sid, "messages": [first, committed_reply(sid)], "trigger": "regenerate-message"}

    def regenerate() -> None:
        with httpx.Client(headers=users["a"][1], timeout=30) as other:
            result["sse"] = read_sse(other, "POST", chat_url(server, sid), json=body)

    second = user_message("second question")
    with transaction.atomic():
        ChatSession.objects.select_for_update().get(pk=sid)  # the session's write lock, held to the commit
        thread = threading.Thread(target=regenerate)
        thread.start()
        wait_until_parked_on_the_lock(thread)
        competitor = store.start_run(
            store.RunStartRequest(
                session_id=sid,
                input_messages=[second],
                turn_message_id=second["id"],
                stream_sequence=stream_before.head_sequence,
                lease_owner="another-process",
                lease_seconds=60,
            )
        ).run
    thread.join(30)
    assert not thread.is_alive()

    refused = result["sse"]
    assert refused.status == 409
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.body == {
        "error": "The run could not be started",
        "code": "state_run_start_conflict",
        "retryable": False,
        "cause": "expected_mismatch",
    }
    # Nothing of the regenerate was written: one run per start, the rows of the two sends only.
    runs = list(Run.objects.filter(session_id=sid).order_by("started_at").values_list("id", "kind", "status"))
    assert runs == [(first_run.id, "send", RunStatus.COMPLETED), (competitor.id, "send", RunStatus.STARTING)]
    rows = list(Message.objects.filter(session_id=sid).order_by("position").values_list("ui_id", "position"))
    assert rows == [*messages_before, (second["id"], 2)]
    assert Message.objects.filter(session_id=sid, position__isnull=True).count() == 0  # no truncate
    assert Checkpoint.objects.filter(session_id=sid).count() == checkpoints_before + 1  # the send's run_start
    session = ChatSession.objects.get(pk=sid)
    assert session.current_run_id == competitor.id and session.message_count == 3
    stream_after = async_to_sync(get_stream_manager().get_info)(sid)
    assert (stream_after.run_id, stream_after.head_sequence) == (stream_before.run_id, stream_before.head_sequence)

    # The competing run ends (this process "executed" it); the session takes sends again.
    store.commit_terminal(
        competitor.id, RunStatus.CANCELLED, response_message=None, stream_sequence=stream_before.head_sequence
    )
    third = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("third")]))
    assert third.status == 200 and third.done


def committed_reply(session_id: str) -> dict:
    """The committed assistant reply of the session's first turn (what the client holds)."""
    row = Message.objects.get(session_id=session_id, role="assistant", position=1)
    return row.to_ui_message()
