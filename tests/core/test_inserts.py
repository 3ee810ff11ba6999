"""store.inserts.insert() writes the row ``save(force_insert=True)`` writes (store/inserts.py)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.db.models.signals import post_save, pre_save

from helix_django.models import ChatSession, Checkpoint, Message, Run
from helix_django.store.inserts import insert

pytestmark = pytest.mark.django_db

SKIP = {"id", "created_at", "updated_at", "started_at", "last_event_at", "session_id", "run_id"}


def columns(instance) -> dict:
    fresh = type(instance).objects.get(pk=instance.pk)
    return {f.attname: getattr(fresh, f.attname) for f in type(instance)._meta.concrete_fields if f.attname not in SKIP}


def rows(session_id: str) -> tuple[ChatSession, Run, Checkpoint, Message]:
    session = ChatSession(id=session_id, state={"plan": ["é", 1, None]}, title="Ünï", message_count=2, owner=None)
    run = Run(id=f"run_{session_id}", session=session, status="streaming", attempt=2, continuation={"k": [1]})
    checkpoint = Checkpoint(session=session, run=run, kind="run_start", message_count=2, stream_sequence=7, state={})
    parts = [{"type": "text", "text": "héllo"}]
    message = Message(session=session, position=0, ui_id="u1", role="user", parts=parts, metadata={"m": True})
    return session, run, checkpoint, message


def test_insert_writes_what_save_writes_and_reads_back_the_auto_key():
    inserted = rows("ins_a")
    saved = rows("ins_b")
    with transaction.atomic():
        for instance in inserted:
            if isinstance(instance, Message):
                instance.checkpoint_id = inserted[2].pk
            insert(instance)
        for instance in saved:
            if isinstance(instance, Message):
                instance.checkpoint_id = saved[2].pk
            instance.save(force_insert=True)
    for mine, theirs in zip(inserted, saved, strict=True):
        assert not mine._state.adding and mine._state.db == theirs._state.db
        assert mine.pk is not None
        expected = columns(theirs)
        if isinstance(mine, Message):
            expected["checkpoint_id"] = inserted[2].pk
        assert columns(mine) == expected
    checkpoint, message = inserted[2], inserted[3]
    assert Checkpoint.objects.filter(pk=checkpoint.pk, session_id="ins_a", run_id="run_ins_a").exists()
    assert Message.objects.get(pk=message.pk).parts == [{"type": "text", "text": "héllo"}]
    assert ChatSession.objects.get(pk="ins_a").created_at is not None  # auto_now_add applied


def test_insert_sends_the_save_signals_and_refuses_a_duplicate_key():
    seen = []

    def before(sender, instance, **kwargs):
        seen.append(("pre", sender, instance.pk, kwargs["raw"]))
        instance.title = "set by a pre_save receiver"

    def after(sender, instance, created, **kwargs):
        seen.append(("post", sender, instance.pk, created))

    pre_save.connect(before, sender=ChatSession, dispatch_uid="test-insert-pre")
    post_save.connect(after, sender=ChatSession, dispatch_uid="test-insert-post")
    try:
        insert(ChatSession(id="ins_signals"))
    finally:
        pre_save.disconnect(dispatch_uid="test-insert-pre", sender=ChatSession)
        post_save.disconnect(dispatch_uid="test-insert-post", sender=ChatSession)
    assert seen == [("pre", ChatSession, "ins_signals", False), ("post", ChatSession, "ins_signals", True)]
    assert ChatSession.objects.get(pk="ins_signals").title == "set by a pre_save receiver"
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(ChatSession(id="ins_signals"))


def test_a_row_with_a_query_expression_is_saved_by_the_orm():
    session = ChatSession(id="ins_expr", created_at=Now())
    insert(session)
    assert not session._state.adding
    assert ChatSession.objects.get(pk="ins_expr").created_at is not None
