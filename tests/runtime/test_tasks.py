"""Scale-out: the web process opens the run, a Django Tasks worker executes it."""

from __future__ import annotations

import asyncio

import pytest
from django.test import override_settings
from django_tasks.signals import task_enqueued

from helix_django.models import Run, ToolExecution
from helix_django.runtime.tasks import TasksExecutor
from helix_django.streams import get_stream_manager
from tests.runtime import toolbox
from tests.runtime.conftest import accumulate, agent, helix, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

DUMMY = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}


@pytest.fixture
def queue():
    """Enqueued task results, in order (the dummy backend keeps them; a test plays the worker)."""
    results = []

    def receiver(sender, task_result, **kwargs):
        results.append(task_result)

    task_enqueued.connect(receiver, weak=False, dispatch_uid="helix-test-queue")
    with override_settings(TASKS=DUMMY):
        yield results
    task_enqueued.disconnect(dispatch_uid="helix-test-queue")


@pytest.fixture
def tasks_executor():
    executor = TasksExecutor()
    yield executor
    executor.close()


async def work(result) -> str:
    """Run one enqueued task the way a worker does: a sync call in a worker thread."""
    return await asyncio.to_thread(result.task.call, *result.args, **result.kwargs)


async def test_a_send_is_readable_at_once_and_executed_by_a_worker(tasks_executor, session, queue):
    with override_settings(HELIX=helix(default=agent({"TEXT": "Answered by a worker."}))):
        handle = await tasks_executor.execute(session, [user_message("hello")])
        run = await Run.objects.aget(pk=handle.run_id)
        assert run.status == "starting" and run.lease_owner.startswith("helix-task:")
        info = await get_stream_manager().get_info(session.stream_id)
        assert info.run_id == run.id and info.status == "active"
        assert [c["type"] for c in run_chunks(await stream_chunks(session.id), run.id)] == ["helix-run-start", "start"]
        assert len(queue) == 1 and queue[0].args == [run.id]

        assert await work(queue[0]) == "completed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "completed" and run.lease_owner == ""
    reply = (await rows(session.id))[1]
    assert text(reply) == "Answered by a worker."
    assert reply == accumulate(run_chunks(await stream_chunks(session.id), run.id), run.response_message_id)
    # A second delivery of the same task does nothing: the run is no longer live.
    assert await work(queue[0]) == "not_claimed"


async def test_an_approved_tool_runs_in_the_worker(tasks_executor, session, queue):
    toolbox.reset()
    steps = [
        {"TOOL_CALLS": [{"id": "d-1", "name": "delete_file", "arguments": {"path": "/tmp/y"}}]},
        {"TEXT": "Deleted."},
    ]
    with override_settings(HELIX=helix(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.delete_file"]))):
        first = await tasks_executor.execute(session, [user_message("delete")])
        assert await work(queue[0]) == "suspended_client_tool"
        handle = await tasks_executor.submit_tool_results(
            session=session, run_id=first.run_id, results=[{"toolCallId": "d-1", "approved": True}]
        )
        assert queue[1].kwargs["approved"] == [["delete_file", {"path": "/tmp/y"}, "d-1"]]
        assert await work(queue[1]) == "completed"
    assert toolbox.calls["delete_file"] == 1
    assert (await ToolExecution.objects.aget(run_id=handle.run_id)).status == "succeeded"
    reply = (await rows(session.id))[1]
    assert reply["id"] == first.response_message_id and text(reply) == "Deleted."
    chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
    assert [c["type"] for c in chunks][:3] == ["helix-run-start", "start", "tool-output-available"]
    assert chunks[0]["kind"] == "tool_result" and chunks[2]["output"] == {"deleted": "/tmp/y"}
