"""Adversarial races on the fast paths that insert first and catch IntegrityError (real threads).

Run on PostgreSQL (``HELIX_TEST_DATABASE_URL``) for the real thing: the later insert
waits on the unique index for the earlier transaction, then takes its savepoint's
IntegrityError path. On SQLite the writes serialize; the outcome must be the same.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django import store
from helix_django.errors import AlreadyRunningError, StreamFenceError
from helix_django.models import ChatSession, Message, Stream
from helix_django.streams import load_stream_manager
from tests.adversarial.threads import THREADS, race
from tests.streams.conftest import BACKENDS

pytestmark = pytest.mark.django_db(transaction=True)


def test_racing_first_creations_of_one_session_create_it_once():
    results = race(lambda i: store.get_or_create_session("sess1", owner_id=None, agent="default"))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sum(created for _session, created in results) == 1
    assert {session.pk for session, _created in results} == {"sess1"}
    assert ChatSession.objects.filter(pk="sess1").count() == 1


def test_racing_first_claims_of_one_stream_leave_the_highest_epoch_holding_it():
    manager = load_stream_manager("database", BACKENDS)

    def claim(i: int):
        return asyncio.run(manager.claim_stream("s1", f"run_{i}", epoch=i + 1))

    results = race(claim)
    unexpected = [r for r in results if isinstance(r, Exception) and not isinstance(r, StreamFenceError)]
    assert not unexpected, results
    assert all(r.cause == "stale_claim" for r in results if isinstance(r, StreamFenceError))
    row = Stream.objects.get(pk="s1")
    assert (row.run_id, row.claim_epoch, row.status) == (f"run_{THREADS - 1}", THREADS, "active")


def test_racing_first_sends_start_one_run_with_unique_positions():
    store.get_or_create_session("sess1")

    def send(i: int):
        message = {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"hi {i}"}]}
        return store.start_run(store.RunStartRequest(session_id="sess1", input_messages=[message])).run

    results = race(send)
    runs = [r for r in results if not isinstance(r, Exception)]
    assert len(runs) == 1, results
    assert all(isinstance(r, AlreadyRunningError) for r in results if isinstance(r, Exception)), results
    rows = list(Message.objects.filter(session_id="sess1", position__isnull=False).values_list("position", "ui_id"))
    assert len(rows) == 1 and rows[0][0] == 0
    store.commit_terminal(runs[0].id, "cancelled", response_message=None, stream_sequence=0)


def test_racing_first_sends_that_create_their_session_create_it_once_and_start_one_run():
    def send(i: int):
        message = {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"hi {i}"}]}
        request = store.RunStartRequest(session_id="new1", input_messages=[message], new_session=store.NewSession())
        return store.start_run(request).run

    results = race(send)
    runs = [r for r in results if not isinstance(r, Exception)]
    assert len(runs) == 1, results
    assert all(isinstance(r, AlreadyRunningError) for r in results if isinstance(r, Exception)), results
    assert ChatSession.objects.filter(pk="new1").count() == 1
    assert ChatSession.objects.get(pk="new1").current_run_id == runs[0].id
    store.commit_terminal(runs[0].id, "cancelled", response_message=None, stream_sequence=0)


def test_racing_superseding_sends_keep_positions_dense():
    store.get_or_create_session("sess1")

    def send(i: int):
        message = {"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": f"hi {i}"}]}
        request = store.RunStartRequest(session_id="sess1", input_messages=[message], supersede_live=True)
        return store.start_run(request).run

    results = race(send)
    assert not [r for r in results if isinstance(r, Exception)], results
    session = ChatSession.objects.get(pk="sess1")
    positions = sorted(
        Message.objects.filter(session_id="sess1", position__isnull=False).values_list("position", flat=True)
    )
    assert positions == list(range(session.message_count)) == list(range(THREADS))
    store.commit_terminal(session.current_run_id, "cancelled", response_message=None, stream_sequence=0)


def test_fenced_step_commits_racing_a_superseding_send_never_land_after_it():
    from helix_django.errors import RunSupersededError

    store.get_or_create_session("sess1")
    first = {"id": "u0", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    old = store.start_run(store.RunStartRequest(session_id="sess1", input_messages=[first])).run

    def act(i: int):
        if i == 0:
            message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "again"}]}
            request = store.RunStartRequest(session_id="sess1", input_messages=[message], supersede_live=True)
            return store.start_run(request).run
        answer = {"id": old.response_message_id, "role": "assistant", "parts": [{"type": "text", "text": f"s{i}"}]}
        return store.commit_step(old.id, response_message=answer, stream_sequence=i, step_count=i)

    results = race(act)
    new = results[0]
    assert not isinstance(new, Exception), results
    assert all(isinstance(r, RunSupersededError) for r in results[1:] if isinstance(r, Exception)), results
    session = ChatSession.objects.get(pk="sess1")
    rows = list(
        Message.objects.filter(session_id="sess1", position__isnull=False)
        .order_by("position")
        .values_list("ui_id", flat=True)
    )
    # The new run's input follows whatever the old run committed before it; nothing of the old run after.
    assert rows[-1] == "u1" and session.current_run_id == new.id and len(rows) == session.message_count
    assert rows[0] == "u0" and rows.count(old.response_message_id) <= 1
    store.commit_terminal(new.id, "cancelled", response_message=None, stream_sequence=0)
