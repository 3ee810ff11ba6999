"""Multi-step runs with tools: messages, checkpoints and stream chunks agree."""

from __future__ import annotations

import pytest

from helix_django.models import Checkpoint, Run, ToolExecution
from helix_django.snapshot import abuild_snapshot
from tests.runtime import toolbox
from tests.runtime.conftest import accumulate, agent, rows, run_chunks, stream_chunks, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

THREE_STEPS = [
    {
        "REASONING": "The user wants the weather. ",
        "TEXT": "Let me look that up.",
        "TOOL_CALLS": [{"id": "call-1", "name": "lookup", "arguments": {"city": "Oslo"}}],
    },
    # A call whose arguments do not match the schema: a tool-input-error, never executed.
    {"TEXT": "Checking once more.", "TOOL_CALLS": [{"id": "call-2", "name": "lookup", "arguments": {"town": 3}}]},
    {"TEXT": "It is sunny in Oslo, 21 degrees."},
]


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()


async def test_three_step_run_with_a_tool_call_agrees_everywhere(executor, session, use_agents):
    use_agents(default=agent({"STEPS": THREE_STEPS}, tools=[f"{toolbox.PATH}.lookup"]))
    handle = await executor.execute(session, [user_message("Weather in Oslo?", "u-w")])
    assert await executor.wait(handle.run_id, 20) == "completed"

    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.status, run.step_count) == ("completed", 3)
    assert toolbox.calls["lookup"] == 1
    executions = [e async for e in ToolExecution.objects.filter(run_id=run.id).order_by("id")]
    assert [(e.tool_call_id, e.name, e.status, e.effect) for e in executions] == [
        ("call-1", "lookup", "succeeded", "read_only")
    ]
    assert executions[0].arguments == {"city": "Oslo"}
    assert executions[0].result == {"city": "Oslo", "forecast": "sunny", "celsius": 21}

    chunks = run_chunks(await stream_chunks(session.id), run.id)
    kinds = [c["type"] for c in chunks]
    assert kinds.count("start-step") == 3 and kinds.count("finish-step") == 3
    assert kinds.count("helix-step-committed") == 3 and kinds.count("finish") == 1
    assert kinds[-1] == "helix-run-end" and chunks[-1]["status"] == "completed"
    assert {c["_step"] for c in chunks if c["type"] == "start-step"} == {1, 2, 3}
    # Every content chunk of a step carries the attempt id its start-step opened.
    attempts = {}
    for chunk in chunks:
        if chunk["type"] == "start-step":
            attempts[chunk["_step"]] = chunk["_attempt"]
        elif "_attempt" in chunk:
            assert chunk["_attempt"] == attempts[chunk["_step"]]
    committed = [c for c in chunks if c["type"] == "helix-step-committed"]
    assert [c["committedAttemptId"] for c in committed] == [attempts[1], attempts[2], attempts[3]]

    messages = await rows(session.id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    reply = messages[1]
    assert reply == accumulate(chunks, run.response_message_id)
    assert [p["type"] for p in reply["parts"]] == [
        "step-start",
        "reasoning",
        "text",
        "tool-lookup",
        "step-start",
        "text",
        "tool-lookup",
        "step-start",
        "text",
    ]
    tool_parts = [p for p in reply["parts"] if p["type"] == "tool-lookup"]
    assert tool_parts[0]["state"] == "output-available" and tool_parts[0]["output"]["forecast"] == "sunny"
    assert tool_parts[1]["state"] == "output-error"
    assert text(reply).endswith("It is sunny in Oslo, 21 degrees.")

    # Checkpoints: run start, one per step (at the step's finish-step), terminal.
    checkpoints = [cp async for cp in Checkpoint.objects.filter(session_id=session.id).order_by("id")]
    assert [(cp.kind, cp.message_count, cp.step_count) for cp in checkpoints] == [
        ("run_start", 1, 0),
        ("step", 2, 1),
        ("step", 2, 2),
        ("step", 2, 3),
        ("terminal", 2, 3),
    ]
    by_seq = dict(await stream_chunks(session.id))
    for cp, marker in zip(checkpoints[1:4], committed, strict=True):
        assert by_seq[cp.stream_sequence]["type"] == "finish-step"
        assert marker["checkpointId"] == cp.id
    assert checkpoints[0].stream_sequence == run.start_sequence == 0
    terminal = checkpoints[-1]
    assert by_seq[terminal.stream_sequence]["type"] == "finish"
    # The chunks up to a step's checkpoint build exactly what that step committed (prefix property).
    upto_step2 = [c for s, c in sorted(by_seq.items()) if s <= checkpoints[2].stream_sequence]
    built = accumulate(upto_step2, run.response_message_id)
    assert [p["type"] for p in built["parts"]] == [p["type"] for p in reply["parts"]][:7]

    snapshot = await abuild_snapshot(session.id)
    assert snapshot["messages"] == messages
    assert snapshot["status"] == "ended" and snapshot["stepCount"] == 3
    assert snapshot["streamSequence"] == terminal.stream_sequence
    assert snapshot["checkpointId"] == terminal.id


async def test_model_context_of_each_step_holds_the_earlier_steps(executor, session, use_agents):
    toolbox.RecordingProvider.requests = []
    use_agents(
        default={
            **agent({"STEPS": THREE_STEPS}, tools=[f"{toolbox.PATH}.lookup"]),
            "PROVIDER": {"BACKEND": f"{toolbox.PATH}.RecordingProvider", "OPTIONS": {"STEPS": THREE_STEPS}},
        }
    )
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    await executor.wait(handle.run_id, 20)
    calls = toolbox.RecordingProvider.requests
    assert len(calls) == 3
    assert calls[0].messages == [{"role": "user", "content": "Weather in Oslo?"}]
    assert calls[0].system == "You are a test assistant."
    assert [t.name for t in calls[0].tools] == ["lookup"]
    assert calls[0].tools[0].parameters["required"] == ["city"]
    second = calls[1].messages
    assert second[1]["role"] == "assistant" and second[1]["tool_calls"][0]["id"] == "call-1"
    assert second[2] == {
        "role": "tool",
        "tool_call_id": "call-1",
        "content": '{"city": "Oslo", "forecast": "sunny", "celsius": 21}',
    }
    assert [m["role"] for m in calls[2].messages] == ["user", "assistant", "tool", "assistant", "tool"]


async def test_a_tool_that_raises_fails_typed_without_its_text(executor, session, use_agents):
    steps = [{"TOOL_CALLS": [{"id": "c1", "name": "explode", "arguments": {}}]}, {"TEXT": "Sorry."}]
    use_agents(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.explode"]))
    handle = await executor.execute(session, [user_message("boom")])
    assert await executor.wait(handle.run_id, 20) == "completed"
    execution = await ToolExecution.objects.aget(run_id=handle.run_id)
    assert (execution.status, execution.error_code, execution.result) == ("failed", "tool_error", None)
    reply = (await rows(session.id))[1]
    part = next(p for p in reply["parts"] if p["type"] == "tool-explode")
    assert part["state"] == "output-error" and part["errorText"] == "The tool failed"
    assert "secret" not in str(reply)
