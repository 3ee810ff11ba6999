"""A forced reconcile (staff's *Mark interrupted*) racing a run's finish never flips it (issue 17, item 4).

The interleavings are made deterministic with gates around the executor's ending
(runtime/endings.py) and the recovery's first store write. Invariant in every order: a run
whose ``finish`` is in its stream (so may have reached a client) ends ``completed``; a run
that ends ``interrupted`` has no ``finish`` in its stream; the stream is never left paused.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django import store
from helix_django.models import Run, RunStatus
from helix_django.recovery.actions import aperform
from helix_django.recovery.inventory import MARK_INTERRUPTED
from helix_django.runtime import endings
from helix_django.streams import get_stream_manager
from helix_django.streams.base import ENDED, FAILED
from helix_django.streams.transactions import joined_transactions
from helix_django.transport.plan import ResponsePlan, plan_frames
from helix_django.transport.replay import ResponseFilter
from tests.runtime.conftest import agent, run_chunks, stream_chunks, user_message
from tests.transport.test_plan_frames import parse

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def in_run_task():
    """Whether the caller is the executor's run task (``helix-run-<id>``), not the recovery."""
    task = asyncio.current_task()
    return task is not None and task.get_name().startswith("helix-run-")


def gate_completed_commit(monkeypatch, gate):
    """Run ``await gate(commit)`` in place of the run's ``completed`` commit, on either path.

    With the database stream manager that commit is one transaction with the run's last
    chunks and its stream's end (``endings.acomplete_in_transaction``); elsewhere it is the
    terminal commit alone, after ``finish`` was flushed.
    """
    original_commit, original_complete = endings.store.acommit_terminal, endings.acomplete_in_transaction

    async def commit(run_id, status, **kwargs):
        if status == RunStatus.COMPLETED and in_run_task():
            return await gate(lambda: original_commit(run_id, status, **kwargs))
        return await original_commit(run_id, status, **kwargs)

    async def complete(*args):
        return await gate(lambda: original_complete(*args))

    monkeypatch.setattr(endings.store, "acommit_terminal", commit)
    monkeypatch.setattr(endings, "acomplete_in_transaction", complete)


async def chat_frames(session_id, run_id):
    """What the chat route sends a client that replays the run from its start."""
    chunks = await stream_chunks(session_id)
    response_filter = ResponseFilter(run_id=run_id)
    response_filter.prescan(chunks)
    run = await Run.objects.aget(pk=run_id)
    return parse([part async for part in plan_frames(ResponsePlan(backlog=chunks, filter=response_filter, run=run))])


async def assert_truthful(session_id, run_id):
    run = await Run.objects.aget(pk=run_id)
    kinds = [c["type"] for c in run_chunks(await stream_chunks(session_id), run_id)]
    info = await get_stream_manager().get_info(session_id)
    frames = await chat_frames(session_id, run_id)
    if "finish" in kinds:
        assert run.status == RunStatus.COMPLETED, "a finish reached the stream but the run ended otherwise"
        assert info.status == ENDED and frames[-1] == "[DONE]"
    else:
        assert run.status == RunStatus.INTERRUPTED
        assert info.status == FAILED and frames[-1]["type"] == "error"
    ends = [c["status"] for c in run_chunks(await stream_chunks(session_id), run_id) if c["type"] == "helix-run-end"]
    assert set(ends) == {run.status}
    return run


async def test_a_finish_written_after_the_reconcile_read_the_stream_is_fenced_out(
    executor, session, use_agents, monkeypatch
):
    """Recovery reads, the run then tries to finish, recovery commits: the finish must not land."""
    use_agents(default=agent({"TEXT": "one two three four", "PACE_TPS": 200}))
    at_complete, release_run, run_committing = asyncio.Event(), asyncio.Event(), asyncio.Event()
    original_complete = endings.EndingsMixin._complete
    original_mark = store.amark_started_tool_executions_unknown

    async def gated_complete(self, reason, **kwargs):
        at_complete.set()
        await release_run.wait()
        return await original_complete(self, reason, **kwargs)

    async def executor_commit(commit):
        run_committing.set()
        await asyncio.sleep(0.2)  # the recovery commits first
        return await commit()

    async def recovery_mark(run_id):
        release_run.set()  # the run goes on to its finish now, after the recovery read its chunks
        done = asyncio.ensure_future(executor.wait(run_id, 5))
        await asyncio.wait([asyncio.ensure_future(run_committing.wait()), done], return_when=asyncio.FIRST_COMPLETED)
        return await original_mark(run_id)

    monkeypatch.setattr(endings.EndingsMixin, "_complete", gated_complete)
    gate_completed_commit(monkeypatch, executor_commit)
    monkeypatch.setattr("helix_django.recovery.outcomes.store.amark_started_tool_executions_unknown", recovery_mark)
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(at_complete.wait(), 5)
    await aperform(MARK_INTERRUPTED, handle.run_id)
    await executor.wait(handle.run_id, 5)
    run = await assert_truthful(session.id, handle.run_id)
    assert run.status == RunStatus.INTERRUPTED


async def test_a_run_about_to_commit_its_end_is_ended_by_a_reconcile_as_its_stream_shows(
    executor, session, use_agents, monkeypatch
):
    """The run is about to commit its end: a forced reconcile ends it as its stream shows, never against it.

    Where the run flushed ``finish`` before its terminal commit, the reconcile completes it;
    with the database stream manager ``finish`` lands only with that commit, so the
    reconcile interrupts it and the run's commit is fenced out.
    """
    use_agents(default=agent({"TEXT": "one two three four", "PACE_TPS": 200}))
    committing, release = asyncio.Event(), asyncio.Event()

    async def gated_commit(commit):
        committing.set()
        await release.wait()
        return await commit()

    gate_completed_commit(monkeypatch, gated_commit)
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(committing.wait(), 5)
    result = await aperform(MARK_INTERRUPTED, handle.run_id)
    release.set()
    await executor.wait(handle.run_id, 5)
    run = await assert_truthful(session.id, handle.run_id)
    assert result.outcome == run.status
    joined = joined_transactions(get_stream_manager(), "default") is not None
    assert run.status == (RunStatus.INTERRUPTED if joined else RunStatus.COMPLETED)


async def test_a_run_that_committed_its_end_during_the_reconcile_leaves_its_stream_ended(
    executor, session, use_agents, monkeypatch
):
    """The run committed completed, then the reconcile fenced its stream: the fence is released as completed."""
    use_agents(default=agent({"TEXT": "one two three four", "PACE_TPS": 200}))
    committed, release = asyncio.Event(), asyncio.Event()

    async def commit_then_wait(commit):
        checkpoint = await commit()
        committed.set()
        await release.wait()
        return checkpoint

    gate_completed_commit(monkeypatch, commit_then_wait)
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(committed.wait(), 5)
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == RunStatus.COMPLETED
    # The inventory no longer offers it (the run ended): drive the scan's forced path directly.
    from helix_django.recovery.scan import arecover_run, fence_writer, release_fence

    live_view = await Run.objects.aget(pk=handle.run_id)
    live_view.status = RunStatus.STREAMING  # what a staff page loaded a moment earlier saw
    assert await fence_writer(live_view) is True
    decision = await arecover_run(handle.run_id, force=True, query_provider=False)
    assert decision.reason == "not_in_flight"
    await release_fence(handle.run_id)
    release.set()
    await executor.wait(handle.run_id, 5)
    await assert_truthful(session.id, handle.run_id)
