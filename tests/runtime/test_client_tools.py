"""Client tools suspend the run until results are submitted; approvals: approved / denied."""

from __future__ import annotations

import copy

import pytest

from helix_django.errors import InvalidToolResultError, RunSupersededError
from helix_django.models import Run, ToolExecution
from helix_django.snapshot import abuild_snapshot
from helix_django.streams import get_stream_manager
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

PICK = f"{toolbox.PATH}.pick_color"
DELETE = f"{toolbox.PATH}.delete_file"


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()


def two_picks() -> list[dict]:
    calls = [
        {"id": "c-1", "name": "pick_color", "arguments": {"prompt": "wall"}},
        {"id": "c-2", "name": "pick_color", "arguments": {"prompt": "door"}},
    ]
    return [{"TEXT": "Pick colors.", "TOOL_CALLS": calls}, {"TEXT": "Nice choices."}]


def answered(message: dict, outputs: dict) -> dict:
    """The browser's copy of the message with outputs filled in (as useChat's addToolResult does)."""
    message = copy.deepcopy(message)
    for part in message["parts"]:
        if part.get("toolCallId") in outputs:
            part.update(state="output-available", output=outputs[part["toolCallId"]])
    return message


async def test_client_tool_batch_suspends_until_every_result_arrives(executor, session, use_agents):
    use_agents(default=agent({"STEPS": two_picks()}, tools=[PICK]))
    first = await executor.execute(session, [user_message("Paint my room", "u-p")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    run = await Run.objects.aget(pk=first.run_id)
    assert run.status == "suspended_client_tool"
    assert (await get_stream_manager().get_info(session.stream_id)).status == "paused"
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["status"] == "paused" and snapshot["resumeMessageId"] == first.response_message_id
    chunks = run_chunks(await stream_chunks(session.id), run.id)
    assert chunks[-1]["type"] == "helix-run-end" and chunks[-1]["status"] == "suspended"
    statuses = [(e.tool_call_id, e.status, e.is_client_tool) async for e in ToolExecution.objects.filter(run=run)]
    assert statuses == [("c-1", "awaiting_client", True), ("c-2", "awaiting_client", True)]

    history = await rows(session.id)
    partial = await executor.execute(session, [history[0], answered(history[1], {"c-1": {"color": "blue"}})])
    assert partial.is_pending_batch and partial.run_id == run.id
    assert (await Run.objects.aget(pk=run.id)).status == "suspended_client_tool"
    assert await Run.objects.filter(session_id=session.id).acount() == 1

    full = answered(history[1], {"c-1": {"color": "blue"}, "c-2": {"color": "red"}})
    handle = await executor.execute(session, [history[0], full])
    assert not handle.is_pending_batch and handle.response_message_id == first.response_message_id
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert (await Run.objects.aget(pk=run.id)).status == "superseded"
    continued = await Run.objects.aget(pk=handle.run_id)
    assert continued.kind == "tool_result" and continued.start_message_count == 1

    messages = await rows(session.id)
    assert len(messages) == 2
    parts = [p for p in messages[1]["parts"] if p["type"] == "tool-pick_color"]
    assert [(p["state"], p["output"]) for p in parts] == [
        ("output-available", {"color": "blue"}),
        ("output-available", {"color": "red"}),
    ]
    assert text(messages[1]) == "Pick colors.Nice choices."
    new_chunks = run_chunks(await stream_chunks(session.id), handle.run_id)
    assert [c["type"] for c in new_chunks][:4] == [
        "helix-run-start",
        "start",
        "tool-output-available",
        "tool-output-available",
    ]
    assert new_chunks[0]["kind"] == "tool_result"

    # A late submit to the superseded run is refused typed.
    with pytest.raises(RunSupersededError):
        await executor.submit_tool_results(
            session=session, run_id=run.id, results=[{"toolCallId": "c-1", "output": {"color": "green"}}]
        )


async def test_invalid_tool_results_are_refused_typed(executor, session, use_agents):
    use_agents(default=agent({"STEPS": two_picks()}, tools=[PICK]))
    first = await executor.execute(session, [user_message("Paint")])
    await executor.wait(first.run_id, 10)
    for bad in ([{"toolCallId": "c-1"}], [{"output": 1}], ["nope"], [{"toolCallId": "c-1", "approved": True}]):
        with pytest.raises(InvalidToolResultError) as caught:
            await executor.submit_tool_results(session=session, run_id=first.run_id, results=bad)
        assert caught.value.to_body()["code"] == "validation_error"
    assert (await Run.objects.aget(pk=first.run_id)).status == "suspended_client_tool"


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_requested_then_answered(executor, session, use_agents, approved):
    steps = [
        {"TOOL_CALLS": [{"id": "d-1", "name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
        {"TEXT": "Handled."},
    ]
    use_agents(default=agent({"STEPS": steps}, tools=[DELETE]))
    first = await executor.execute(session, [user_message("Delete it")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    request = next(c for c in await stream_chunks(session.id) if c[1]["type"] == "tool-approval-request")[1]
    assert request["approvalId"] == f"{first.run_id}::d-1" and request["toolCallId"] == "d-1"
    record = await ToolExecution.objects.aget(run_id=first.run_id)
    assert record.status == "awaiting_approval" and record.approval_id == request["approvalId"]
    assert toolbox.calls["delete_file"] == 0

    handle = await executor.submit_tool_results(
        session=session, run_id=first.run_id, results=[{"toolCallId": "d-1", "approved": approved}]
    )
    assert await executor.wait(handle.run_id, 10) == "completed"
    record = await ToolExecution.objects.aget(run_id=first.run_id)
    assert record.status == ("approved" if approved else "denied")
    part = next(p for p in (await rows(session.id))[1]["parts"] if p["type"] == "tool-delete_file")
    if approved:
        assert toolbox.calls["delete_file"] == 1
        assert part["state"] == "output-available" and part["output"] == {"deleted": "/tmp/x"}
        executed = await ToolExecution.objects.aget(run_id=handle.run_id)
        assert executed.status == "succeeded"
    else:
        assert toolbox.calls["delete_file"] == 0
        assert part["state"] == "output-denied"


async def test_client_tools_in_consecutive_steps_of_one_message(executor, session, use_agents):
    steps = [
        {"TOOL_CALLS": [{"id": "c-1", "name": "pick_color", "arguments": {"prompt": "wall"}}]},
        {"TEXT": "And the door?", "TOOL_CALLS": [{"id": "c-2", "name": "pick_color", "arguments": {"prompt": "door"}}]},
        {"TEXT": "All set."},
    ]
    use_agents(default=agent({"STEPS": steps}, tools=[PICK]))
    first = await executor.execute(session, [user_message("Paint")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    history = await rows(session.id)
    second = await executor.execute(session, [history[0], answered(history[1], {"c-1": {"color": "blue"}})])
    assert await executor.wait(second.run_id, 10) == "suspended_client_tool"
    history = await rows(session.id)
    # The browser sends the whole message again: c-1 (answered in an earlier run) and c-2.
    third = await executor.execute(
        session, [history[0], answered(history[1], {"c-1": {"color": "blue"}, "c-2": {"color": "red"}})]
    )
    assert await executor.wait(third.run_id, 10) == "completed"
    reply = (await rows(session.id))[1]
    assert reply["id"] == first.response_message_id
    outputs = [p["output"] for p in reply["parts"] if p["type"] == "tool-pick_color"]
    assert outputs == [{"color": "blue"}, {"color": "red"}]
    assert text(reply) == "And the door?All set."
    kinds = [r.kind async for r in Run.objects.filter(session_id=session.id).order_by("created_at")]
    assert kinds == ["send", "tool_result", "tool_result"]
