"""The state store: run-start commit, supersede, fenced writes, atomic commits."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from helix_django import store
from helix_django.errors import (
    AlreadyRunningError,
    RunNotFoundError,
    RunStartConflictError,
    RunSupersededError,
    SessionNotFoundError,
)
from helix_django.models import ChatSession, Checkpoint, Message, Run
from tests.databases import AliasRouter, second_connection

pytestmark = pytest.mark.django_db


def user_message(text: str, message_id: str = "u1") -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def assistant(message_id: str, text: str) -> dict:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text, "state": "done"}]}


@pytest.fixture
def session():
    return store.get_or_create_session("sess1")[0]


def start(session_id="sess1", **kwargs):
    kwargs.setdefault("input_messages", [user_message("hello")])
    return store.start_run(store.RunStartRequest(session_id=session_id, **kwargs))


def test_run_start_commit_writes_input_run_and_checkpoint_together(session):
    result = start(stream_sequence=7, turn_message_id="u1")
    run = result.run
    session.refresh_from_db()
    assert session.current_run_id == run.id
    assert session.message_count == 1
    assert run.status == "starting"
    assert (run.start_message_count, run.start_sequence) == (1, 7)
    assert list(Message.objects.filter(session=session).values_list("ui_id", "position", "run_id")) == [
        ("u1", 0, run.id)
    ]
    cp = result.checkpoint
    assert (cp.kind, cp.message_count, cp.stream_sequence, cp.run_id) == ("run_start", 1, 7, run.id)
    assert Message.objects.get(ui_id="u1").checkpoint_id == cp.id


def test_missing_session_is_typed():
    with pytest.raises(SessionNotFoundError):
        start(session_id="nope")


def test_a_live_run_refuses_a_second_send(session):
    start()
    with pytest.raises(AlreadyRunningError) as excinfo:
        start(input_messages=[user_message("again", "u2")])
    assert excinfo.value.to_body()["code"] == "state_already_running"
    assert Run.objects.count() == 1
    assert Message.objects.count() == 1


def test_compare_and_set_on_the_current_run(session):
    first = start().run
    store.commit_terminal(
        first.id, "completed", response_message=assistant(first.response_message_id, "hi"), stream_sequence=3
    )
    with pytest.raises(RunStartConflictError) as excinfo:
        start(input_messages=[user_message("x", "u2")], expected_current_run_id="run_other")
    assert excinfo.value.cause == "expected_mismatch"
    second = start(input_messages=[user_message("x", "u2")], expected_current_run_id=first.id).run
    assert ChatSession.objects.get(pk="sess1").current_run_id == second.id


def test_supersede_every_other_live_run_and_fence_its_writes(session):
    old = start().run
    checkpoints_before = Checkpoint.objects.count()
    new = start(input_messages=[], supersede_live=True, kind="regenerate").run
    old.refresh_from_db()
    assert old.status == "superseded"
    assert Checkpoint.objects.count() == checkpoints_before + 1
    count = Checkpoint.objects.count()
    with pytest.raises(RunSupersededError):
        store.commit_step(
            old.id, response_message=assistant(old.response_message_id, "late"), stream_sequence=9, step_count=1
        )
    with pytest.raises(RunSupersededError):
        store.commit_terminal(
            old.id, "completed", response_message=assistant(old.response_message_id, "late"), stream_sequence=9
        )
    with pytest.raises(RunSupersededError):
        store.update_run(old.id, status="streaming")
    assert Checkpoint.objects.count() == count
    assert not Message.objects.filter(ui_id=old.response_message_id).exists()
    assert Run.objects.get(pk=old.id).status == "superseded"
    assert ChatSession.objects.get(pk="sess1").current_run_id == new.id


def test_a_fenced_write_locks_the_session_then_reads_the_run_in_two_bare_statements(session):
    """The fence of a run's writes (002, "Superseded runs"): the session row locked through the
    run first (FOR UPDATE where the database has it), then the run's status read under that
    lock, then the write. Bare statements: the ORM's query building cost more than the
    queries (docs/performance.md)."""
    run = start().run
    with CaptureQueriesContext(connection) as queries:
        store.update_run(run.id, status="streaming")
    statements = [query["sql"] for query in queries if "SAVEPOINT" not in query["sql"]]  # the test's transaction
    lock, read, write = statements
    assert lock.startswith(f"SELECT id, current_run_id FROM {ChatSession._meta.db_table} WHERE id = (SELECT")
    assert lock.endswith(" FOR UPDATE") == connection.features.has_select_for_update
    assert read.startswith(f"SELECT status FROM {Run._meta.db_table} WHERE id = ")
    assert write.startswith(f'UPDATE "{Run._meta.db_table}"')
    assert Run.objects.get(pk=run.id).status == "streaming"
    with pytest.raises(RunNotFoundError):
        store.update_run("run_missing", status="streaming")


def test_step_and_terminal_commits(session):
    run = start().run
    cp1 = store.commit_step(
        run.id,
        response_message=assistant(run.response_message_id, "step one"),
        stream_sequence=10,
        step_count=1,
        state={"k": 1},
    )
    assert (cp1.kind, cp1.message_count, cp1.stream_sequence, cp1.step_count) == ("step", 2, 10, 1)
    assert cp1.state == {"k": 1}
    row = Message.objects.get(ui_id=run.response_message_id)
    assert (row.position, row.checkpoint_id) == (1, cp1.id)
    cp2 = store.commit_terminal(
        run.id,
        "completed",
        response_message=assistant(run.response_message_id, "done"),
        stream_sequence=20,
        step_count=2,
    )
    row.refresh_from_db()
    assert row.parts[0]["text"] == "done"
    assert row.metadata["helix"] == {"runId": run.id, "status": "completed", "partial": False}
    assert row.checkpoint_id == cp2.id
    run.refresh_from_db()
    assert (run.status, run.step_count, run.lease_owner) == ("completed", 2, "")
    committed = cp2.run  # the run as the commit left it: what run_finished receivers get, without a re-read
    assert [getattr(committed, f) for f in ("status", "step_count", "lease_owner", "finished_at")] == [
        run.status,
        run.step_count,
        run.lease_owner,
        run.finished_at,
    ]
    with pytest.raises(RunSupersededError):
        store.commit_step(
            run.id, response_message=assistant(run.response_message_id, "x"), stream_sequence=21, step_count=3
        )


def test_failed_terminal_keeps_partial_output_marked(session):
    from helix_django.errors import ProviderError

    run = start().run
    store.commit_terminal(
        run.id,
        "failed",
        response_message=assistant(run.response_message_id, "The main diff"),
        stream_sequence=5,
        error=ProviderError(retryable=True),
    )
    run.refresh_from_db()
    row = Message.objects.get(ui_id=run.response_message_id)
    assert row.metadata["helix"]["partial"] is True
    assert row.metadata["helix"]["status"] == "failed"
    assert run.partial_chars == len("The main diff")
    assert run.error_detail() == {
        "code": "provider_error",
        "category": "provider",
        "retryable": True,
        "message": "The model provider failed",
    }


def test_a_failure_inside_a_commit_leaves_neither_rows_nor_checkpoint(session):
    run = start().run
    checkpoints = Checkpoint.objects.count()
    broken = {"id": run.response_message_id, "role": "assistant", "parts": [{"type": "text", "text": object()}]}
    with pytest.raises(TypeError):
        store.commit_step(run.id, response_message=broken, stream_sequence=4, step_count=1)
    assert Checkpoint.objects.count() == checkpoints
    assert not Message.objects.filter(ui_id=run.response_message_id).exists()
    assert ChatSession.objects.get(pk="sess1").message_count == 1


def test_a_failure_inside_the_run_start_commit_writes_nothing(session):
    with pytest.raises(KeyError):
        start(input_messages=[user_message("ok", "u1"), {"id": "broken", "parts": []}])
    assert Run.objects.count() == 0
    assert Checkpoint.objects.count() == 0
    assert Message.objects.count() == 0
    session.refresh_from_db()
    assert (session.current_run_id, session.message_count) == (None, 0)


def test_truncate_checkpoint_archives_later_rows(session):
    run = start().run
    store.commit_terminal(
        run.id, "completed", response_message=assistant(run.response_message_id, "first answer"), stream_sequence=8
    )
    again = start(input_messages=[], truncate_to=1, kind="regenerate", attempt=2, stream_sequence=8).run
    assert again.attempt == 2
    truncates = Checkpoint.objects.filter(kind="truncate")
    assert list(truncates.values_list("message_count", "stream_sequence")) == [(1, 8)]
    archived = Message.objects.get(ui_id=run.response_message_id)
    assert archived.position is None and archived.archived_at is not None
    assert Run.objects.get(pk=run.id).status == "completed"
    assert again.start_message_count == 1


def test_continuation_reuses_the_assistant_message(session):
    run = start().run
    store.commit_step(
        run.id, response_message=assistant(run.response_message_id, "calling tool"), stream_sequence=3, step_count=1
    )
    store.commit_terminal(
        run.id, "completed", response_message=assistant(run.response_message_id, "calling tool"), stream_sequence=4
    )
    cont = start(input_messages=[assistant(run.response_message_id, "calling tool + output")], kind="tool_result").run
    assert cont.response_message_id == run.response_message_id
    assert cont.start_message_count == 1
    assert Message.objects.filter(position__isnull=False).count() == 2


def test_leases_are_compare_and_set(session):
    run = start(lease_owner="proc-a", lease_seconds=30).run
    assert not store.claim_lease(run.id, "proc-b", 30)
    assert store.renew_lease(run.id, "proc-a", 30)
    Run.objects.filter(pk=run.id).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert store.claim_lease(run.id, "proc-b", 30)
    assert not store.renew_lease(run.id, "proc-a", 30)


def test_a_long_session_title_is_shortened_for_display():
    session = store.get_or_create_session("sess-title")[0]
    session.title = "What happens to an answer if I reload the page while it is being written?"
    assert str(session) == "What happens to an answer if I reload t…"
    session.title = ""
    assert str(session) == "sess-title"


def test_a_first_run_start_commit_creates_its_session_in_the_same_transaction(django_user_model):
    owner = django_user_model.objects.create(username="first")
    result = start(session_id="new1", new_session=store.NewSession(owner_id=owner.pk, agent="default"))
    session = ChatSession.objects.get(pk="new1")
    assert (session.owner_id, session.current_run_id, session.message_count) == (owner.pk, result.run.id, 1)
    assert list(Message.objects.filter(session=session).values_list("ui_id", "position")) == [("u1", 0)]


def test_a_failed_first_run_start_commit_leaves_no_session():
    with pytest.raises(KeyError):
        start(session_id="new1", new_session=store.NewSession(), input_messages=[{"id": "broken", "parts": []}])
    with pytest.raises(RunStartConflictError):
        start(session_id="new2", new_session=store.NewSession(), expected_current_run_id="run_x")
    assert not ChatSession.objects.filter(pk__in=["new1", "new2"]).exists()
    assert Run.objects.count() == 0


def test_a_first_send_to_a_session_that_exists_meanwhile_starts_in_it_only_for_its_owner(django_user_model):
    owner, other = (django_user_model.objects.create(username=name) for name in ("owner", "other"))
    store.get_or_create_session("taken", owner_id=owner.pk)
    with pytest.raises(SessionNotFoundError):
        start(session_id="taken", new_session=store.NewSession(owner_id=other.pk))
    with pytest.raises(SessionNotFoundError):
        start(session_id="taken", new_session=store.NewSession(anonymous_key="visitor"))
    assert Run.objects.count() == 0
    run = start(session_id="taken", new_session=store.NewSession(owner_id=owner.pk)).run
    assert ChatSession.objects.get(pk="taken").current_run_id == run.id
    with pytest.raises(AlreadyRunningError):  # the second "first" send meets the first one's live run
        start(
            session_id="taken",
            new_session=store.NewSession(owner_id=owner.pk),
            input_messages=[user_message("b", "u2")],
        )


@pytest.fixture
def helix_alias(settings):
    with second_connection("helix") as connection:
        settings.DATABASE_ROUTERS = [AliasRouter(read="helix", write="helix")]
        yield connection


@pytest.mark.django_db(transaction=True)
def test_a_commit_routed_to_another_database_is_one_transaction_there(helix_alias):
    """With a router sending helix's models to another alias, a commit's transaction opens
    on that alias: a commit that fails after its first INSERT leaves nothing behind (it
    opened on ``default`` and the rows it wrote on the other alias stayed)."""

    def fail_on_the_checkpoint(execute, sql, params, many, context):
        if "helix_django_checkpoint" in sql and sql.startswith("INSERT"):
            raise RuntimeError("the database went away")
        return execute(sql, params, many, context)

    request = store.RunStartRequest(session_id="routed", input_messages=[user_message("hi")])
    request.new_session = store.NewSession()
    with helix_alias.execute_wrapper(fail_on_the_checkpoint), pytest.raises(RuntimeError):
        store.start_run(request)
    with connection.cursor() as cursor:  # "default": what the other alias committed
        cursor.execute("SELECT COUNT(*) FROM helix_django_chatsession WHERE id = 'routed'")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT COUNT(*) FROM helix_django_run WHERE session_id = 'routed'")
        assert cursor.fetchone()[0] == 0
    assert store.start_run(request).run.session_id == "routed"  # the alias works for a commit that succeeds
