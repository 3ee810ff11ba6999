"""The bare one-row UPDATE on a send's path writes what ``QuerySet.update()`` and ``save(update_fields)`` write.

``store.inserts.update`` builds its statement once per model, alias and field names (the
ORM's update built it per call: in py-spy, about a third of a run's completion);
``store.rows.save_session`` uses it unless something listens to the session's signals.
"""

from __future__ import annotations

import datetime

import pytest
from django.db.models.signals import post_save
from django.utils import timezone

from helix_django import store
from helix_django.models import ChatSession, Message, Run
from helix_django.store.inserts import update
from helix_django.store.rows import save_session

pytestmark = pytest.mark.django_db


def started(session_id: str) -> Run:
    store.get_or_create_session(session_id)
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    return store.start_run(store.RunStartRequest(session_id=session_id, input_messages=[message])).run


def test_json_datetimes_foreign_keys_and_none_are_written_as_the_orm_writes_them():
    run = started("sess-update")
    parts = [
        {"type": "text", "text": 'é ünïcode \u2028 and "quotes"'},
        {"type": "data-x", "data": {"n": [1, 2.5, None]}},
    ]
    when = timezone.now().replace(microsecond=123456) - datetime.timedelta(days=1)
    matched = update(
        Message,
        {"session": run.session_id, "position": 0},
        {"parts": parts, "metadata": {"k": True}, "run": None},
    )
    assert matched == 1
    row = Message.objects.get(session_id=run.session_id, position=0)
    assert (row.parts, row.metadata, row.run_id) == (parts, {"k": True}, None)
    assert update(Run, {"id": run.id}, {"status": "streaming", "last_event_at": when, "lease_expires_at": None}) == 1
    run.refresh_from_db()
    assert (run.status, run.last_event_at, run.lease_expires_at) == ("streaming", when, None)
    session = ChatSession.objects.get(pk=run.session_id)
    checkpoint = store.commit_step(
        run.id, response_message={"id": "a1", "role": "assistant", "parts": []}, stream_sequence=3, step_count=1
    )
    # A row for a foreign key (``run``), its attname with a key (``checkpoint_id``):
    assert update(Message, {"session": session, "position": 0}, {"run": run, "checkpoint_id": checkpoint.id}) == 1
    row = Message.objects.get(session=session, position=0)
    assert (row.run_id, row.checkpoint_id) == (run.id, checkpoint.id)
    assert update(Run, {"id": "run_missing"}, {"status": "failed"}) == 0


def test_saving_a_session_bumps_updated_at_and_sends_its_signals_only_through_save_when_someone_listens():
    run = started("sess-save")
    session = ChatSession.objects.get(pk=run.session_id)
    before = session.updated_at
    session.message_count, session.state = 7, {"a": [1]}
    save_session(session, "message_count", "state")
    stored = ChatSession.objects.get(pk=session.pk)
    assert (stored.message_count, stored.state) == (7, {"a": [1]})
    assert stored.updated_at == session.updated_at and stored.updated_at > before
    heard = []

    def listener(sender, instance, update_fields, **kwargs):
        heard.append((instance.pk, sorted(update_fields)))

    post_save.connect(listener, sender=ChatSession)
    try:
        session.message_count = 8
        save_session(session, "message_count")
    finally:
        post_save.disconnect(listener, sender=ChatSession)
    assert heard == [(session.pk, ["message_count", "updated_at"])]
    assert ChatSession.objects.get(pk=session.pk).message_count == 8
