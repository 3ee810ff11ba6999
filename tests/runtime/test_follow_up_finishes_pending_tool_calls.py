"""A follow-up message finishes the client-tool calls it consumed or abandoned (002, "Tool results ...").

No committed message keeps a pending (``input-available`` / ``approval-requested``) call once
a later message superseded its run; a late browser result to that run is refused typed.
"""

from __future__ import annotations

import copy

import pytest

from helix_django.errors import RunSupersededError
from helix_django.models import Run, ToolExecution
from helix_django.runtime.followups import ABANDONED_TEXT
from helix_django.snapshot import abuild_snapshot
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, run_chunks, stream_chunks, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

PICKS = [
    {"id": "c-1", "name": "pick_color", "arguments": {"prompt": "wall"}},
    {"id": "c-2", "name": "pick_color", "arguments": {"prompt": "door"}},
]
RECORDING = f"{toolbox.PATH}.RecordingProvider"


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()
    toolbox.RecordingProvider.requests = []


def use_script(use_agents, steps, tools):
    provider = {"BACKEND": RECORDING, "OPTIONS": {"STEPS": steps}}
    use_agents(default={**agent(tools=[f"{toolbox.PATH}.{t}" for t in tools]), "PROVIDER": provider})


def tool_states(message: dict) -> dict[str, tuple]:
    return {
        p["toolCallId"]: (p["state"], p.get("output"), p.get("errorText"))
        for p in message["parts"]
        if "toolCallId" in p
    }


async def statuses(run_id: str) -> dict[str, tuple[str, str]]:
    return {e.tool_call_id: (e.status, e.error_code) async for e in ToolExecution.objects.filter(run_id=run_id)}


async def test_a_follow_up_consumes_held_results_and_abandons_the_rest(executor, session, use_agents):
    use_script(use_agents, [{"TEXT": "Pick colors.", "TOOL_CALLS": PICKS}, {"TEXT": "unused"}], ["pick_color"])
    first = await executor.execute(session, [user_message("Paint my room", "u-1")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    history = await rows(session.id)
    held = copy.deepcopy(history[1])  # the browser answered c-1 (addToolResult) and never sent it
    next(p for p in held["parts"] if p.get("toolCallId") == "c-1").update(state="output-available", output="blue")

    use_script(use_agents, [{"TEXT": "Never mind the door."}], ["pick_color"])
    second = await executor.execute(session, [history[0], held, user_message("Skip the door", "u-2")])
    assert await executor.wait(second.run_id, 10) == "completed"
    superseded = await Run.objects.aget(pk=first.run_id)
    # The waiting run records what resolved it and the run that followed (the admin links both).
    assert (superseded.status, superseded.recovery_action, superseded.resolved_by) == (
        "superseded",
        "superseded",
        second.run_id,
    )

    committed = await rows(session.id)
    assert [m["id"] for m in committed] == ["u-1", first.response_message_id, "u-2", second.response_message_id]
    expected = {"c-1": ("output-available", "blue", None), "c-2": ("output-error", None, ABANDONED_TEXT)}
    assert tool_states(committed[1]) == expected
    snapshot = await abuild_snapshot(session.id)
    assert tool_states(snapshot["messages"][1]) == expected
    assert await statuses(first.run_id) == {"c-1": ("succeeded", ""), "c-2": ("failed", "abandoned")}

    # The new run's stream finishes both calls right after its start; the model saw both outcomes.
    chunks = run_chunks(await stream_chunks(session.id), second.run_id)
    assert [(c["type"], c.get("toolCallId")) for c in chunks[:4]] == [
        ("helix-run-start", None),
        ("start", None),
        ("tool-output-available", "c-1"),
        ("tool-output-error", "c-2"),
    ]
    context = toolbox.RecordingProvider.requests[-1].messages
    assert [(m["role"], m.get("content")) for m in context if m["role"] == "tool"] == [
        ("tool", '"blue"'),
        ("tool", ABANDONED_TEXT),
    ]

    # The browser's late result for the abandoned call reaches a superseded run: typed 409.
    late = copy.deepcopy(held)
    next(p for p in late["parts"] if p.get("toolCallId") == "c-2").update(state="output-available", output="red")
    with pytest.raises(RunSupersededError):
        await executor.execute(session, [history[0], late])
    assert await statuses(first.run_id) == {"c-1": ("succeeded", ""), "c-2": ("failed", "abandoned")}


async def test_a_follow_up_abandons_a_pending_approval_without_running_the_tool(executor, session, use_agents):
    call = {"id": "d-1", "name": "delete_file", "arguments": {"path": "/tmp/x"}}
    use_script(use_agents, [{"TEXT": "Shall I?", "TOOL_CALLS": [call]}, {"TEXT": "unused"}], ["delete_file"])
    first = await executor.execute(session, [user_message("Delete x", "u-1")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    history = await rows(session.id)

    use_script(use_agents, [{"TEXT": "Kept it."}], ["delete_file"])
    second = await executor.execute(session, [*history, user_message("Actually keep it", "u-2")])
    assert await executor.wait(second.run_id, 10) == "completed"
    assert tool_states((await rows(session.id))[1]) == {"d-1": ("output-error", None, ABANDONED_TEXT)}
    assert await statuses(first.run_id) == {"d-1": ("denied", "abandoned")}
    assert toolbox.calls["delete_file"] == 0


async def test_a_follow_up_after_a_partial_batch_shows_the_stored_answer(executor, session, use_agents):
    use_script(use_agents, [{"TEXT": "Pick colors.", "TOOL_CALLS": PICKS}, {"TEXT": "unused"}], ["pick_color"])
    first = await executor.execute(session, [user_message("Paint my room", "u-1")])
    assert await executor.wait(first.run_id, 10) == "suspended_client_tool"
    answer = [{"toolCallId": "c-1", "output": "green"}]
    assert await executor.submit_tool_results(session=session, run_id=first.run_id, results=answer) is None
    history = await rows(session.id)  # the row itself still shows both calls waiting

    use_script(use_agents, [{"TEXT": "Fine."}], ["pick_color"])
    second = await executor.execute(session, [*history, user_message("Enough", "u-2")])
    assert await executor.wait(second.run_id, 10) == "completed"
    expected = {"c-1": ("output-available", "green", None), "c-2": ("output-error", None, ABANDONED_TEXT)}
    assert tool_states((await rows(session.id))[1]) == expected
    assert await statuses(first.run_id) == {"c-1": ("succeeded", ""), "c-2": ("failed", "abandoned")}
