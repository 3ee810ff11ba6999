"""A run's completion is one transaction (issue 23): its last step, the terminal commit, its last chunks, the end.

With the database stream manager on the store's database, a run that completes with its
step stores its last chunks with ``finish-step`` and ``finish``, commits the step and the
run ``completed``, writes ``helix-step-committed`` and ``helix-run-end`` and ends its
stream in one transaction and one thread hop (``runtime/completion.py``). A failure among
them leaves none of them, and the ending that follows stores the step's chunks (never
``finish``): no text is lost, and no ``finish`` precedes a failure.
"""

from __future__ import annotations

import contextlib

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from helix_django.models import Checkpoint, Run, StreamChunk
from helix_django.runtime.providers.scripted import default_reply
from helix_django.streams import get_stream_manager
from tests.runtime.conftest import agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
QUESTION = "Where does a run end?"


async def _checkpoints(run_id: str) -> list[tuple[str, int, int]]:
    rows_ = Checkpoint.objects.filter(run_id=run_id).order_by("id").values_list("kind", "stream_sequence", "id")
    return [row async for row in rows_]


async def test_a_completed_runs_last_chunks_and_commits_are_stored_in_order(executor, session, use_agents):
    use_agents(default=agent())
    handle = await executor.execute(session, [user_message(QUESTION)])
    assert await executor.wait(handle.run_id, 10) == "completed"
    stored = [(seq, chunk) for seq, chunk in await stream_chunks(session.id) if chunk.get("_run") == handle.run_id]
    last = {chunk["type"]: (seq, chunk) for seq, chunk in stored[-4:]}
    assert list(last) == ["finish-step", "finish", "helix-step-committed", "helix-run-end"]
    (start, *_), (step, step_at, step_id), (terminal, terminal_at, _id) = await _checkpoints(handle.run_id)
    assert (start, step, terminal) == ("run_start", "step", "terminal")
    assert step_at == last["finish-step"][0] and terminal_at == last["finish"][0]  # each commit's cursor
    assert last["helix-step-committed"][1]["checkpointId"] == step_id
    manager = get_stream_manager()
    info = await manager.get_info(session.stream_id)
    assert (info.status, info.end_status, info.head_sequence) == ("ended", "completed", last["helix-run-end"][0])
    # Once the readers at the head were served, the ended stream is read from the database
    # only: a purge by another process (a deleted session) leaves nothing in this one's tail.
    assert manager.tail.read(session.stream_id, 0, 500) is None


@contextlib.contextmanager
def refusing_completed_run_ends():
    """A database trigger that refuses to store a ``helix-run-end`` of a completed run (a real failing write)."""
    table = StreamChunk._meta.db_table
    condition = "NEW.type = 'helix-run-end' AND CAST(NEW.payload AS TEXT) LIKE '%completed%'"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION helix_test_refuse() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER helix_test_refuse BEFORE INSERT ON {table} FOR EACH ROW "
                f"WHEN ({condition}) EXECUTE FUNCTION helix_test_refuse()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER helix_test_refuse BEFORE INSERT ON {table} "
                f"WHEN {condition} BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER IF EXISTS helix_test_refuse ON {table}")
                cursor.execute("DROP FUNCTION IF EXISTS helix_test_refuse()")
            else:
                cursor.execute("DROP TRIGGER IF EXISTS helix_test_refuse")


async def test_a_failure_among_the_last_writes_leaves_none_of_them_and_loses_no_text(
    executor, session, use_agents, caplog
):
    use_agents(default=agent())
    refusing = refusing_completed_run_ends()
    await sync_to_async(refusing.__enter__)()
    try:
        handle = await executor.execute(session, [user_message(QUESTION)])
        assert await executor.wait(handle.run_id, 10) == "failed"
    finally:
        await sync_to_async(refusing.__exit__)(None, None, None)
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.error_code == "framework_internal_error"
    # The step commit, finish and the completion rolled back with the refused write.
    assert [kind for kind, _at, _id in await _checkpoints(handle.run_id)] == ["run_start", "terminal"]
    kinds = [chunk["type"] for chunk in run_chunks(await stream_chunks(session.id), handle.run_id)]
    assert "finish" not in kinds and "helix-step-committed" not in kinds
    assert kinds[-3:] == ["finish-step", "message-metadata", "helix-run-end"]  # then the stream's typed error
    # Every word of the answer is stored, in the stream and in the committed (partial) message.
    reply = (await rows(session.id))[1]
    assert text(reply) == default_reply(QUESTION) and reply["metadata"]["helix"]["partial"] is True
    info = await get_stream_manager().get_info(session.stream_id)
    assert info.status == "failed"
