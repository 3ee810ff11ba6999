"""A run's completion (its last step and its end) leaves the rows a step commit then a terminal commit leave.

``store.commit_completion`` is one transaction that fences once, reads the session and the
run once and writes the response message, the session and the run once (issue 23: the
completion had been a step commit then a terminal commit inside one transaction, each
fencing, reading and writing the same rows: the largest part of a send's server CPU in
py-spy, 22 % of the samples of 150 short sends through daphne).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from helix_django import store
from helix_django.errors import RunSupersededError
from helix_django.models import ChatSession, Checkpoint, Message, Run

pytestmark = pytest.mark.django_db


def user_message(text: str) -> dict:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


def reply(message_id: str, *texts: str) -> dict:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": t} for t in texts]}


def started(session_id: str) -> Run:
    store.get_or_create_session(session_id)
    return store.start_run(store.RunStartRequest(session_id=session_id, input_messages=[user_message("hi")])).run


def rows_of(session_id: str) -> dict:
    """What a snapshot and the admin read: message rows, checkpoints, the session's count, the run."""
    session = ChatSession.objects.get(pk=session_id)
    run = Run.objects.get(pk=session.current_run_id)
    checkpoints = list(Checkpoint.objects.filter(session=session).order_by("id"))
    index = {cp.id: i for i, cp in enumerate(checkpoints)}
    return {
        "messages": [
            (m.position, m.role, m.parts, {k: v for k, v in m.metadata.items() if k != "helix"}, index[m.checkpoint_id])
            for m in Message.objects.filter(session=session).order_by("position")
        ],
        "helix": [m.metadata.get("helix", {}).get("status") for m in Message.objects.filter(session=session)],
        "checkpoints": [(cp.kind, cp.message_count, cp.stream_sequence, cp.step_count) for cp in checkpoints],
        "message_count": session.message_count,
        "run": (run.status, run.step_count, run.partial_chars, run.lease_owner, run.finished_at is not None),
    }


def two_commits(run: Run, final: dict, step: dict | None, step_count: int) -> None:
    from django.db import transaction

    with transaction.atomic():
        if step is not None:
            store.commit_step(run.id, response_message=step, stream_sequence=8, step_count=step_count)
        store.commit_terminal(run.id, "completed", response_message=final, stream_sequence=9)


@pytest.mark.parametrize(
    ("final_texts", "step_texts", "step_count"),
    [
        (("the answer",), ("the answer",), 1),  # one step: the common chat reply
        (("step one", "the answer"), ("the answer",), 2),  # a tool round, then the last step
        ((), (), 1),  # a last step without output: the step's row is what stays
        (("no step",), None, 0),  # an ending without a step of its own
    ],
)
def test_the_completion_leaves_the_rows_of_a_step_commit_then_a_terminal_commit(final_texts, step_texts, step_count):
    before, after = started("sess-two-commits"), started("sess-completion")
    two_commits(
        before,
        reply(before.response_message_id, *final_texts),
        None if step_texts is None else reply(before.response_message_id, *step_texts),
        step_count,
    )
    step, terminal = store.commit_completion(
        after.id,
        response_message=reply(after.response_message_id, *final_texts),
        stream_sequence=9,
        step_message=None if step_texts is None else reply(after.response_message_id, *step_texts),
        step_sequence=8,
        step_count=step_count,
    )
    assert rows_of("sess-completion") == rows_of("sess-two-commits")
    assert (step is None) == (step_texts is None)
    assert terminal.run.status == "completed"


def statements(queries) -> list[str]:
    return [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]


def test_the_completion_fences_and_reads_once_and_writes_each_row_once():
    run = started("sess-once")
    message = reply(run.response_message_id, "the answer")
    with CaptureQueriesContext(connection) as queries:
        store.commit_completion(
            run.id, response_message=message, stream_sequence=9, step_message=message, step_sequence=8, step_count=1
        )
    sql = statements(queries)
    message_table, session_table, run_table = Message._meta.db_table, ChatSession._meta.db_table, Run._meta.db_table
    assert sum(s.startswith(f"SELECT id, current_run_id FROM {session_table}") for s in sql) == 1, sql  # the fence
    assert sum(s.startswith(f"SELECT * FROM {run_table}") for s in sql) == 1, sql
    assert sum(s.startswith(f"SELECT * FROM {session_table}") for s in sql) == 1, sql
    assert sum(s.startswith(f'UPDATE "{message_table}"') for s in sql) == 1, sql
    assert sum(s.startswith(f'UPDATE "{session_table}"') for s in sql) == 1, sql
    assert sum(s.startswith(f'UPDATE "{run_table}"') for s in sql) == 1, sql


def test_a_completion_inside_a_transaction_that_fenced_the_run_does_not_fence_again():
    from django.db import transaction

    run = started("sess-fenced")
    message = reply(run.response_message_id, "the answer")
    with transaction.atomic():
        store.lock_run(run.id)
        with CaptureQueriesContext(connection) as queries:
            store.commit_completion(run.id, response_message=message, stream_sequence=9, fenced=True)
    fences = [
        s for s in statements(queries) if s.startswith(f"SELECT id, current_run_id FROM {ChatSession._meta.db_table}")
    ]
    assert fences == []
    assert Run.objects.get(pk=run.id).status == "completed"


def test_a_superseded_run_cannot_complete():
    run = started("sess-superseded")
    store.commit_terminal(run.id, "cancelled", response_message=None, stream_sequence=3)
    with pytest.raises(RunSupersededError):
        store.commit_completion(run.id, response_message=reply(run.response_message_id, "late"), stream_sequence=9)
    assert Run.objects.get(pk=run.id).status == "cancelled"
