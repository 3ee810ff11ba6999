"""Adversarial tests of the bare-SQL store paths (store/rows.lock_fence, store/reads): fences, deadlocks, raw rows.

Real threads on a real database: run on PostgreSQL (``HELIX_TEST_DATABASE_URL``) for row
locks under READ COMMITTED; on SQLite the IMMEDIATE transactions serialize and every
outcome must be the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from helix_django import store
from helix_django.errors import HelixError, RunNotActionableError, RunSupersededError
from helix_django.models import LIVE_STATUSES, ChatSession, Checkpoint, Message, Run, ToolExecution
from helix_django.store import reads
from tests.adversarial.threads import race
from tests.databases import AliasRouter, second_connection

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_run_left_live():
    """No executor runs these runs: end the ones a test leaves live (the flush waits for live runs)."""
    yield
    Run.objects.filter(status__in=LIVE_STATUSES).update(status="cancelled")


def user(message_id: str, text: str = "hello") -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def answer(message_id: str, text: str = "answer") -> dict:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}], "metadata": {}}


def start(session_id: str, message_id: str, **extra) -> Run:
    return store.start_run(store.RunStartRequest(session_id=session_id, input_messages=[user(message_id)], **extra)).run


def tool_fields(call_id: str) -> dict:
    return {
        "tool_call_id": call_id,
        "name": "lookup",
        "arguments": {"q": 1},
        "effect": "read",
        "idempotency_key": "",
        "is_client_tool": False,
        "step": 1,
    }


def in_thread(fn: Callable[[], Any], outcome: list[Any]) -> threading.Thread:
    def target() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:  # the test inspects it
            outcome.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def holding_after(predicate: Callable[[str, Any], bool], reached: threading.Event, seconds: float = 0.5):
    """An execute wrapper that keeps the transaction open ``seconds`` after a matching statement."""

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if predicate(sql, params or ()):
            reached.set()
            time.sleep(seconds)
        return result

    return wrapper


FENCED_WRITES: dict[str, Callable[[str], Any]] = {
    "update_run": lambda run_id: store.update_run(run_id, status="streaming", provider_operation_id="op-late"),
    "commit_step": lambda run_id: store.commit_step(
        run_id, response_message=answer("late-answer"), stream_sequence=9, step_count=1, state={"late": True}
    ),
    "commit_terminal": lambda run_id: store.commit_terminal(
        run_id, "completed", response_message=answer("late-answer"), stream_sequence=9
    ),
    "save_tool_execution": lambda run_id: store.save_tool_execution(run_id, tool_fields("call-late"), status="started"),
}


def nothing_written_by_the_late_write(run: Run, session_id: str) -> None:
    run.refresh_from_db()
    assert run.provider_operation_id == ""
    assert not Message.objects.filter(session_id=session_id, ui_id="late-answer").exists()
    assert not ToolExecution.objects.filter(tool_call_id="call-late").exists()
    assert not Checkpoint.objects.filter(session_id=session_id, stream_sequence=9).exists()
    assert ChatSession.objects.get(pk=session_id).state != {"late": True}


def fenced_write_behind(status: str, holder: Callable[[], Any], write: str, run_id: str) -> tuple[Any, Any]:
    """Run ``holder`` in a thread, held open right after it set a run ``status`` (its
    transaction holds the session), and the fenced ``write`` of ``run_id`` in another
    thread meanwhile; return (the holder's result, the write's result or exception)."""
    reached, outcome, late = threading.Event(), [], []
    table = Run._meta.db_table
    hold = holding_after(lambda sql, params: sql.startswith(f'UPDATE "{table}"') and status in params, reached)

    def held():
        with connection.execute_wrapper(hold):
            return holder()

    def fenced():
        assert reached.wait(10)
        return FENCED_WRITES[write](run_id)

    threads = [in_thread(held, outcome), in_thread(fenced, late)]
    for thread in threads:
        thread.join(30)
    [result], [verdict] = outcome, late
    return result, verdict


@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", sorted(FENCED_WRITES))
def test_a_fenced_write_waiting_on_a_superseding_send_writes_nothing(write):
    """Every fenced write (update_run, commit_step, commit_terminal, a tool execution) that
    waits on a superseding send holding the session finds its run superseded and writes
    nothing; the new run keeps the session."""
    session_id = f"s6-sup-{write}"
    store.get_or_create_session(session_id)
    first = start(session_id, "u1")
    second_id, verdict = fenced_write_behind(
        "superseded", lambda: start(session_id, "u2", supersede_live=True).id, write, first.id
    )
    assert isinstance(verdict, RunSupersededError), verdict
    nothing_written_by_the_late_write(first, session_id)
    assert first.status == "superseded"
    assert ChatSession.objects.get(pk=session_id).current_run_id == second_id
    assert Run.objects.get(pk=second_id).status == "starting"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", sorted(FENCED_WRITES))
def test_the_run_status_read_after_the_session_lock_wait_is_the_latest_committed(write):
    """A run ended (cancelled) by a transaction holding its session, while it stays the
    session's current run: only the fence's second statement (the run's status) can tell.
    The fenced write that waited on that session lock must read the committed status and
    write nothing (READ COMMITTED: a new statement sees the other transaction's commit)."""
    session_id = f"s6-rc-{write}"
    store.get_or_create_session(session_id)
    run = start(session_id, "u1")

    def cancel():
        return store.commit_terminal(run.id, "cancelled", response_message=None, stream_sequence=1).id

    terminal_id, verdict = fenced_write_behind("cancelled", cancel, write, run.id)
    assert isinstance(verdict, RunSupersededError), verdict
    nothing_written_by_the_late_write(run, session_id)
    assert run.status == "cancelled"
    assert ChatSession.objects.get(pk=session_id).current_run_id == run.id
    assert Checkpoint.objects.filter(session_id=session_id).order_by("-id").first().id == terminal_id


@pytest.mark.timeout(120)
def test_a_storm_of_fenced_writes_recovery_transitions_and_sends_on_one_session_never_deadlocks():
    """Lock order: every write of a run locks the session row first, then run, message and
    tool rows. Six threads mixing fenced writes, recovery transitions, answers to tool
    calls, superseding sends and terminal commits on one session, for several rounds: every
    outcome is a success or a typed HelixError (never a deadlock or another DatabaseError),
    and the session ends with one live run at most and dense positions."""
    session_id = "s6-storm"
    store.get_or_create_session(session_id)
    current = [start(session_id, "u0").id]

    def operation(kind: int, round_: int) -> Any:
        run_id = current[0]
        if kind == 0:
            return store.update_run(run_id, status="streaming")
        if kind == 1:
            return store.commit_step(run_id, response_message=answer(f"a{round_}"), stream_sequence=1, step_count=1)
        if kind == 2:
            fields = {**tool_fields(f"call{round_}"), "is_client_tool": True}
            store.save_tool_execution(run_id, fields, status="awaiting_client")
            return store.answer_tool_execution(run_id, f"call{round_}", status="succeeded", result={"ok": 1})
        if kind == 3:
            return store.transition_run(run_id, frozenset({"streaming", "starting"}), "recovering", lease_owner="w")
        if kind == 4:
            new = start(session_id, f"u{round_}-{kind}", supersede_live=True)
            current[0] = new.id
            return new.id
        return store.commit_terminal(run_id, "cancelled", response_message=answer(f"a{round_}"), stream_sequence=2)

    for round_ in range(1, 6):
        results = race(lambda i, round_=round_: operation(i, round_))
        leaked = [r for r in results if isinstance(r, Exception) and not isinstance(r, HelixError)]
        assert not leaked, leaked
        session = ChatSession.objects.get(pk=session_id)
        live = list(Run.objects.filter(session_id=session_id, status__in=LIVE_STATUSES).values_list("id", flat=True))
        assert len(live) <= 1 and set(live) <= {session.current_run_id}
        positions = list(
            Message.objects.filter(session_id=session_id, position__isnull=False).values_list("position", flat=True)
        )
        assert sorted(positions) == list(range(len(positions)))
        assert session.message_count == len(positions)  # the active rows are exactly [0, n)
        if not live:  # the next round needs a live current run
            current[0] = start(session_id, f"u{round_}-next", supersede_live=True).id


def fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_raw_instances_equal_the_orm_s_for_every_column_kind(django_user_model):
    """read_session / read_run (Manager.raw) give the ORM's values for jsonb/JSON, timestamps,
    nullable foreign keys and booleans, with ``_state`` of a saved row on the write alias."""
    owner = django_user_model.objects.create(username="s6-owner")
    store.get_or_create_session("s6-raw", owner_id=owner.pk)
    state = {"plan": ["ä", 1, 2.5, None, True, {"nested": []}], "": "empty key"}
    ChatSession.objects.filter(pk="s6-raw").update(state=state, title="Tïtle")
    run = start("s6-raw", "u1", request_key="k" * 20, continuation={"response_id": "r1", "n": [1, {"x": None}]})
    Run.objects.filter(pk=run.id).update(error_retryable=True, is_continuation_valid=False, lease_expires_at=None)
    bare = ChatSession.objects.create(pk="s6-bare")  # no owner, no current run, empty state
    with transaction.atomic():
        locked, read = reads.read_session("s6-raw", lock=True), reads.read_run(run.id)
    assert fields(locked) == fields(ChatSession.objects.get(pk="s6-raw"))
    assert fields(read) == fields(Run.objects.get(pk=run.id))
    assert fields(reads.read_session("s6-bare")) == fields(ChatSession.objects.get(pk=bare.pk))
    assert locked.state == state and locked.owner_id == owner.pk and locked.created_at.tzinfo is not None
    assert (read.error_retryable, read.is_continuation_valid, read.lease_expires_at) == (True, False, None)
    assert read.continuation == {"response_id": "r1", "n": [1, {"x": None}]}
    for instance in (locked, read):
        assert (instance._state.adding, instance._state.db) == (False, reads.write_alias())


def test_commits_saving_a_raw_read_session_write_its_state_back_unchanged():
    """commit_step and commit_terminal without a new state save the raw-read session
    (``update_fields``): its JSON state must be written back as it was, never re-encoded."""
    state = {"plan": ["ä", {"k": "v"}], "quote": "\"'", "n": None}
    store.get_or_create_session("s6-state")
    ChatSession.objects.filter(pk="s6-state").update(state=state)
    run = start("s6-state", "u1")
    step = store.commit_step(run.id, response_message=answer("a1"), stream_sequence=1, step_count=1)
    assert ChatSession.objects.get(pk="s6-state").state == state == Checkpoint.objects.get(pk=step.id).state
    terminal = store.commit_terminal(run.id, "completed", response_message=answer("a1"), stream_sequence=2)
    session = ChatSession.objects.get(pk="s6-state")
    assert session.state == state == Checkpoint.objects.get(pk=terminal.id).state
    assert (session.message_count, session.current_run_id) == (2, run.id)
    assert session.title == "" and session.owner_id is None  # columns not in update_fields untouched


def test_active_positions_of_a_ten_thousand_message_body_with_duplicates():
    """A body may carry 10 000 messages (the chat schema's maxItems): one IN list of that
    many parameters, duplicates included, on SQLite and PostgreSQL."""
    session = ChatSession.objects.create(pk="s6-long", message_count=10_000)
    Message.objects.bulk_create(
        Message(session=session, position=i, ui_id=f"m{i}", role="user", parts=[], checkpoint_id=1)
        for i in range(10_000)
    )
    ids = [f"m{i}" for i in range(10_000)] + ["m5", "m5", "unknown"]
    with transaction.atomic():
        positions = reads.active_positions("s6-long", ids)
    assert positions == {f"m{i}": i for i in range(10_000)}


def test_a_send_of_a_long_conversation_replaces_known_rows_and_appends_new_ones():
    """start_run with hundreds of inputs, most already active rows: the known ones keep
    their positions, the new ones append, missing/empty ids never match a row."""
    store.get_or_create_session("s6-send")
    history = [user(f"h{i}") for i in range(300)]
    first = store.start_run(store.RunStartRequest(session_id="s6-send", input_messages=history)).run
    store.commit_terminal(first.id, "completed", response_message=answer("a300"), stream_sequence=1)
    body = [*history, answer("a300"), user("h301")]
    second = store.start_run(store.RunStartRequest(session_id="s6-send", input_messages=body)).run
    rows = dict(Message.objects.filter(session_id="s6-send", position__isnull=False).values_list("ui_id", "position"))
    assert rows == {**{f"h{i}": i for i in range(300)}, "a300": 300, "h301": 301}
    assert (second.start_message_count, ChatSession.objects.get(pk="s6-send").message_count) == (302, 302)


def test_active_positions_of_an_id_held_by_two_active_rows_is_the_later_row():
    """When one UI id is held by two active rows (a body that repeated an id), the mapping
    is deterministic: the later position wins, as the ORM's ordered read had it."""
    session = ChatSession.objects.create(pk="s6-dup", message_count=3)
    for position in (2, 0, 1):  # inserted out of position order
        ui_id = "same" if position in (0, 2) else "other"
        Message.objects.create(session=session, position=position, ui_id=ui_id, role="user", parts=[], checkpoint_id=1)
    with transaction.atomic():
        if connection.vendor == "postgresql":  # whatever plan: a sequential scan returns heap order
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute("SET LOCAL enable_bitmapscan = off")
        assert reads.active_positions("s6-dup", ["same", "other"]) == {"same": 2, "other": 1}


def test_read_rows_serves_the_snapshot_and_the_run_context_with_the_orm_s_rows():
    """read_rows after a rewind: archived rows never, rows at or after ``before`` never, in
    position order whatever the insertion order, JSON decoded exactly as the ORM decodes."""
    from asgiref.sync import async_to_sync

    from helix_django.runtime.requests import _rows
    from helix_django.snapshot import _read_body, abuild_snapshot

    store.get_or_create_session("s6-rows")
    parts = [{"type": "text", "text": 'é\u2028"x"'}, {"type": "data-x", "data": {"n": [1, None]}}]
    first = store.start_run(
        store.RunStartRequest(session_id="s6-rows", input_messages=[{**user("u0"), "parts": parts}, user("u1")])
    ).run
    store.commit_terminal(first.id, "completed", response_message=answer("a2"), stream_sequence=1)
    second = start("s6-rows", "u3", truncate_to=1)  # rewinds u1, a2: archived
    store.commit_step(second.id, response_message=answer("a4"), stream_sequence=2, step_count=1)
    orm = Message.objects.filter(session_id="s6-rows", position__isnull=False).order_by("position")
    expected = [m.to_ui_message() for m in orm]
    assert [m["id"] for m in expected] == ["u0", "u3", "a4"]
    assert [r.ui_message() for r in reads.read_rows("s6-rows")] == expected
    assert _rows("s6-rows", 2) == expected[:2]
    assert _rows("s6-rows", 0) == []
    assert [r.ui_message() for r in reads.read_rows("s6-rows", before=99)] == expected
    checkpoint, rows = _read_body("s6-rows")
    assert checkpoint.message_count == 3 and [r.ui_message() for r in rows] == expected
    snapshot = async_to_sync(abuild_snapshot)("s6-rows")
    assert snapshot["messages"] == expected and snapshot["messages"][0]["parts"] == parts


def test_fence_errors_stay_typed_for_odd_run_ids():
    """A fenced write of an unknown, empty, very long, quoted or non-ASCII run id raises
    RunNotFoundError, never a DatabaseError."""
    from helix_django.errors import RunNotFoundError

    for run_id in ("", "x" * 500, "run_'; DROP TABLE x; --", "rün", "run_%s", "run_%(x)s"):
        for write in FENCED_WRITES.values():
            with pytest.raises(RunNotFoundError):
                write(run_id)
    assert reads.read_session("x" * 500) is None and reads.read_run("%s") is None
    assert not reads.holds_active_message("%s", "%(x)s")
    with transaction.atomic():
        assert reads.live_run_ids("'") == [] and reads.active_positions("'", ["%s", "'"]) == {}


@pytest.fixture
def replica(settings):
    """A read replica: a second connection to the test database (this thread's), routed every read."""
    with second_connection("replica") as connection:
        settings.DATABASE_ROUTERS = [AliasRouter(read="replica", write="default")]
        yield connection


def test_with_a_read_replica_a_commit_reads_only_on_the_alias_it_writes_to(replica):
    """Multi-database: every read a commit makes (its fence, its session and run rows, its
    checks) is on the write alias, inside its transaction; the send's reads before the
    commit (session, trailing message) and the row reads of a snapshot or a run's context
    go to the read alias."""
    from django.test.utils import CaptureQueriesContext

    from helix_django.runtime.requests import _rows

    store.get_or_create_session("s6-replica")
    with CaptureQueriesContext(replica) as outside:
        assert reads.read_session("s6-replica").pk == "s6-replica"
        assert not reads.holds_active_message("s6-replica", "u1")
        assert reads.read_rows("s6-replica") == [] and _rows("s6-replica", 5) == []
    assert len(outside) == 4
    commits = {
        "start_run": lambda: start("s6-replica", "u1"),
        "update_run": lambda: store.update_run(current[0].id, status="streaming"),
        "save_tool_execution": lambda: store.save_tool_execution(
            current[0].id, {**tool_fields("c1"), "is_client_tool": True}, status="awaiting_client"
        ),
        "answer_tool_execution": lambda: store.answer_tool_execution(current[0].id, "c1", status="succeeded"),
        "commit_step": lambda: store.commit_step(
            current[0].id, response_message=answer("a1"), stream_sequence=1, step_count=1
        ),
        "supersede": lambda: start("s6-replica", "u2", supersede_live=True),
        "commit_terminal": lambda: store.commit_terminal(
            current[0].id, "interrupted", response_message=answer("a3"), stream_sequence=2
        ),
        "transition_run": lambda: store.transition_run(current[0].id, frozenset({"interrupted"}), "recovering"),
        "commit_terminal without output": lambda: store.commit_terminal(
            current[0].id, "interrupted", response_message=None, stream_sequence=3
        ),
        "commit_terminal of an ended run": lambda: store.commit_terminal(
            current[0].id,
            "failed",
            response_message=None,
            stream_sequence=3,
            allow_terminal_from=frozenset({"interrupted"}),
        ),
        "archive_response": lambda: store.archive_response(current[0].id, stream_sequence=4),
    }
    current: list[Run] = []
    on_replica = {}
    for name, commit in commits.items():
        with CaptureQueriesContext(replica) as queries:
            result = commit()
        if isinstance(result, Run):
            current[:] = [result]
        on_replica[name] = [q["sql"] for q in queries]
    assert on_replica == dict.fromkeys(commits, [])
    assert Run.objects.get(pk=current[0].id).status == "failed"
    assert ChatSession.objects.get(pk="s6-replica").message_count == 3  # u1, a1, u2: a3 archived


@pytest.mark.timeout(60)
def test_archive_response_waiting_on_a_recovery_transition_sees_the_run_live_again():
    """archive_response ("Discard partial") of an interrupted run, while a recovery moves
    the run to ``recovering`` (live) under the session lock: archive_response waits on that
    lock, then must judge the run's status as committed, not as read before the wait (on
    PostgreSQL the run read before the lock is stale). The recovering run's response row
    stays."""
    store.get_or_create_session("s6-archive")
    run = start("s6-archive", "u1")
    store.commit_terminal(run.id, "interrupted", response_message=answer("a1", "partial"), stream_sequence=1)
    reached, outcome, late = threading.Event(), [], []
    table = Run._meta.db_table
    hold = holding_after(lambda sql, params: sql.startswith(f'UPDATE "{table}"') and "recovering" in params, reached)

    def recover():
        with connection.execute_wrapper(hold):
            return store.transition_run(run.id, frozenset({"interrupted"}), "recovering", lease_owner="w")

    def discard():
        assert reached.wait(10)
        return store.archive_response(run.id, stream_sequence=2)

    threads = [in_thread(recover, outcome), in_thread(discard, late)]
    for thread in threads:
        thread.join(30)
    assert outcome == [True]
    [verdict] = late
    assert isinstance(verdict, RunNotActionableError), verdict
    assert Run.objects.get(pk=run.id).status == "recovering"
    assert Message.objects.get(session_id="s6-archive", ui_id="a1").position == 1
    assert ChatSession.objects.get(pk="s6-archive").message_count == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", ["commit_step", "commit_terminal"])
def test_a_session_deleted_while_a_fenced_write_holds_it_never_deadlocks(write):
    """delete_session while a run's fenced write holds the session row (it has the lock,
    its message and checkpoint writes follow): both finish without a DatabaseError
    (a deadlock on PostgreSQL when the delete locks message rows before the session); the
    session is gone."""
    store.get_or_create_session("s6-delete")
    run = start("s6-delete", "u1")
    store.commit_step(run.id, response_message=answer("late-answer", "first"), stream_sequence=1, step_count=1)
    reached, outcome, late = threading.Event(), [], []
    table = ChatSession._meta.db_table
    hold = holding_after(lambda sql, params: sql.startswith(f"SELECT id, current_run_id FROM {table}"), reached, 1.0)

    def fenced():
        with connection.execute_wrapper(hold):
            return FENCED_WRITES[write](run.id)

    def delete():
        assert reached.wait(10)
        return store.delete_session("s6-delete")

    threads = [in_thread(fenced, late), in_thread(delete, outcome)]
    for thread in threads:
        thread.join(30)
    assert outcome == [None], outcome
    [verdict] = late
    assert not isinstance(verdict, Exception) or isinstance(verdict, HelixError), verdict
    assert not ChatSession.objects.filter(pk="s6-delete").exists()
    assert not Message.objects.filter(session_id="s6-delete").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("write", sorted(FENCED_WRITES))
def test_a_fenced_write_waiting_on_a_session_delete_finds_its_run_gone(write):
    """The other order: delete_session holds the session row, a fenced write of its run
    waits on it, then finds the run gone: a typed RunNotFoundError, nothing written."""
    from helix_django.errors import RunNotFoundError

    store.get_or_create_session("s6-delete-first")
    run = start("s6-delete-first", "u1")
    reached, outcome, late = threading.Event(), [], []
    table = ChatSession._meta.db_table
    hold = holding_after(lambda sql, params: sql.startswith(f"SELECT * FROM {table} WHERE id"), reached)

    def delete():
        with connection.execute_wrapper(hold):
            return store.delete_session("s6-delete-first")

    def fenced():
        assert reached.wait(10)
        return FENCED_WRITES[write](run.id)

    threads = [in_thread(delete, outcome), in_thread(fenced, late)]
    for thread in threads:
        thread.join(30)
    assert outcome == [None], outcome
    [verdict] = late
    assert isinstance(verdict, RunNotFoundError), verdict
    assert not Run.objects.filter(pk=run.id).exists()
    assert not Message.objects.filter(session_id="s6-delete-first").exists()
    assert not ToolExecution.objects.filter(tool_call_id="call-late").exists()
