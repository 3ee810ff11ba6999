"""The send path's bare-SQL reads return what the ORM's queries return (store/reads.py)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from helix_django import store
from helix_django.models import LIVE_STATUSES, ChatSession, Message, Run
from helix_django.store import reads

pytestmark = pytest.mark.django_db


def user_message(message_id: str) -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": "héllo"}]}


@pytest.fixture
def session():
    session = store.get_or_create_session("reads1")[0]
    ChatSession.objects.filter(pk=session.pk).update(state={"plan": ["a", 1, None]}, title="Ünïcode")
    return session


def fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_read_session_and_read_run_return_the_instances_the_orm_returns(session):
    run = store.start_run(store.RunStartRequest(session_id=session.pk, input_messages=[user_message("u1")])).run
    with transaction.atomic():
        locked = reads.read_session(session.pk, lock=True)
        read = reads.read_run(run.id)
    assert fields(reads.read_session(session.pk)) == fields(locked) == fields(ChatSession.objects.get(pk=session.pk))
    assert fields(read) == fields(Run.objects.get(pk=run.id))
    assert locked.state == {"plan": ["a", 1, None]}  # JSON decoded, datetimes converted
    assert not locked._state.adding  # a saved row, not a session a send would create
    assert reads.read_session("missing") is None
    assert reads.read_run("run_missing") is None


def test_message_and_run_reads_see_only_active_rows_and_live_runs(session):
    first = store.start_run(store.RunStartRequest(session_id=session.pk, input_messages=[user_message("u1")])).run
    store.commit_terminal(first.id, "completed", response_message=None, stream_sequence=0)
    second = store.start_run(store.RunStartRequest(session_id=session.pk, input_messages=[user_message("u2")])).run
    Message.objects.create(session=session, position=None, ui_id="archived", role="user", parts=[], checkpoint_id=1)
    expected_live = Run.objects.filter(session=session, status__in=LIVE_STATUSES).values_list("id", flat=True)
    assert reads.live_run_ids(session.pk) == list(expected_live) == [second.id]
    assert reads.holds_active_message(session.pk, "u2")
    assert not reads.holds_active_message(session.pk, "archived")
    assert not reads.holds_active_message("other", "u2")
    assert reads.active_positions(session.pk, ["u2", "u1", "archived", "nope"]) == {"u1": 0, "u2": 1}
    assert reads.active_positions(session.pk, []) == {}


def test_a_send_reads_its_session_and_trailing_message_without_orm_query_building(session, django_user_model):
    from asgiref.sync import async_to_sync
    from rest_framework.authtoken.models import Token

    from helix_django.transport.chat import _parse
    from helix_django.transport.chat_caller import identify
    from helix_django.transport.host import build_request

    user = django_user_model.objects.create_user("reader")
    ChatSession.objects.filter(pk=session.pk).update(owner=user)
    token = Token.objects.create(user=user)
    store.start_run(store.RunStartRequest(session_id=session.pk, input_messages=[user_message("u1")]))
    body = b'{"id": "reads1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}'
    headers = [(b"authorization", f"Token {token.key}".encode())]
    scope = {"type": "http", "method": "POST", "path": "/c", "headers": headers, "query_string": b""}
    scope["url_route"] = {"kwargs": {"session_id": "reads1"}}
    request, error = async_to_sync(_parse)(scope, body)  # the body's schema check runs off the event loop
    assert error is None
    with CaptureQueriesContext(connection) as queries:
        caller = identify(build_request(scope, body), request, create_anonymous=False)
    assert caller.session.pk == "reads1" and caller.holds_last_message
    statements = [query["sql"] for query in queries if "helix_django" in query["sql"]]
    assert statements[0].startswith(f"SELECT * FROM {ChatSession._meta.db_table} WHERE id = ")
    assert statements[1].startswith(f"SELECT 1 FROM {Message._meta.db_table} WHERE session_id = ")
    # The session holds the message, so the request is a resume: its reads join the same hop
    # (transport/resume_reads.py): the session's run, then the committed tool calls.
    assert statements[2].startswith(f"SELECT * FROM {Run._meta.db_table} WHERE id = ")
    assert statements[3].startswith(f"SELECT ui_id, parts FROM {Message._meta.db_table} WHERE session_id = ")
    assert len(statements) == 4


def test_read_rows_returns_the_committed_rows_in_order_before_a_bound(session):
    run = store.start_run(
        store.RunStartRequest(session_id=session.pk, input_messages=[user_message("u1"), user_message("u2")])
    ).run
    Message.objects.create(session=session, position=None, ui_id="archived", role="user", parts=[], checkpoint_id=1)
    rows = reads.read_rows(session.pk)
    orm = Message.objects.filter(session=session, position__isnull=False).order_by("position")
    assert [row.ui_message() for row in rows] == [message.to_ui_message() for message in orm]
    assert [(row.position, row.ui_id) for row in rows] == [(0, "u1"), (1, "u2")]
    assert rows[0].parts == [{"type": "text", "text": "héllo"}]  # JSON decoded on every database
    assert [row.ui_id for row in reads.read_rows(session.pk, before=1)] == ["u1"]
    assert reads.read_rows("missing") == []
    assert run.start_message_count == 2


def test_recent_runs_filters_by_status_and_continuability_newest_first(session):
    ended = []
    for n in range(3):
        run = store.start_run(store.RunStartRequest(session_id=session.pk, input_messages=[user_message(f"u{n}")])).run
        store.commit_terminal(run.id, "interrupted", response_message=None, stream_sequence=0)
        ended.append(run.id)
    Run.objects.filter(pk=ended[0]).update(is_continuation_valid=False)
    got = reads.recent_runs(session.pk, frozenset({"interrupted", "failed"}), continuable=True, limit=20)
    assert [run.id for run in got] == [ended[2], ended[1]]
    assert [run.id for run in reads.recent_runs(session.pk, frozenset({"interrupted"}), continuable=True, limit=1)] == [
        ended[2]
    ]
    assert [
        run.id for run in reads.recent_runs(session.pk, frozenset({"interrupted"}), continuable=False, limit=9)
    ] == [ended[0]]
    assert reads.recent_runs(session.pk, frozenset({"completed"}), continuable=True, limit=9) == []
