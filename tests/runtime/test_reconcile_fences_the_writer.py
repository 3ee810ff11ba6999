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
from helix_django.transport.plan import ResponsePlan, plan_frames
from helix_django.transport.replay import ResponseFilter
from tests.runtime.conftest import agent, run_chunks, stream_chunks, user_message
from tests.transport.test_plan_frames import parse

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def in_run_task():
    """Whether the caller is the executor's run task (``helix-run-<id>``), not the recovery."""
    task = asyncio.current_task()
    return task is not None and task.get_name().startswith("helix-run-")


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
    original_complete, original_commit = endings.EndingsMixin._complete, endings.store.acommit_terminal
    original_mark = store.amark_started_tool_executions_unknown

    async def gated_complete(self, reason):
        at_complete.set()
        await release_run.wait()
        return await original_complete(self, reason)

    async def executor_commit(run_id, status, **kwargs):
        if status == RunStatus.COMPLETED and in_run_task():
            run_committing.set()
            await asyncio.sleep(0.2)  # the recovery commits first
        return await original_commit(run_id, status, **kwargs)

    async def recovery_mark(run_id):
        release_run.set()  # the run goes on to its finish now, after the recovery read its chunks
        done = asyncio.ensure_future(executor.wait(run_id, 5))
        await asyncio.wait([asyncio.ensure_future(run_committing.wait()), done], return_when=asyncio.FIRST_COMPLETED)
        return await original_mark(run_id)

    monkeypatch.setattr(endings.EndingsMixin, "_complete", gated_complete)
    monkeypatch.setattr(endings.store, "acommit_terminal", executor_commit)
    monkeypatch.setattr("helix_django.recovery.outcomes.store.amark_started_tool_executions_unknown", recovery_mark)
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(at_complete.wait(), 5)
    await aperform(MARK_INTERRUPTED, handle.run_id)
    await executor.wait(handle.run_id, 5)
    run = await assert_truthful(session.id, handle.run_id)
    assert run.status == RunStatus.INTERRUPTED


async def test_a_finish_written_before_the_reconcile_ends_the_run_completed(executor, session, use_agents, monkeypatch):
    """The run flushed its finish and is about to commit: a forced reconcile completes it, never interrupts it."""
    use_agents(default=agent({"TEXT": "one two three four", "PACE_TPS": 200}))
    committing, release = asyncio.Event(), asyncio.Event()
    original_commit = endings.store.acommit_terminal

    async def gated_commit(run_id, status, **kwargs):
        if status == RunStatus.COMPLETED and in_run_task():
            committing.set()
            await release.wait()
        return await original_commit(run_id, status, **kwargs)

    monkeypatch.setattr(endings.store, "acommit_terminal", gated_commit)
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(committing.wait(), 5)
    result = await aperform(MARK_INTERRUPTED, handle.run_id)
    release.set()
    await executor.wait(handle.run_id, 5)
    assert result.outcome == "completed"
    await assert_truthful(session.id, handle.run_id)


async def test_a_run_that_committed_its_end_during_the_reconcile_leaves_its_stream_ended(
    executor, session, use_agents, monkeypatch
):
    """The run committed completed, then the reconcile fenced its stream: the fence is released as completed."""
    use_agents(default=agent({"TEXT": "one two three four", "PACE_TPS": 200}))
    committed, release = asyncio.Event(), asyncio.Event()
    original_commit = endings.store.acommit_terminal

    async def commit_then_wait(run_id, status, **kwargs):
        checkpoint = await original_commit(run_id, status, **kwargs)
        if status == RunStatus.COMPLETED and in_run_task():
            committed.set()
            await release.wait()
        return checkpoint

    monkeypatch.setattr(endings.store, "acommit_terminal", commit_then_wait)
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
