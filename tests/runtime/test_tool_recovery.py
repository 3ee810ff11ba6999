"""Tool executions survive a process death: side effects are never repeated by a recovery."""

from __future__ import annotations

import asyncio
import threading

import pytest

from helix_django import store
from helix_django.errors import RunNotActionableError
from helix_django.models import Run, ToolExecution
from helix_django.signals import tool_executed
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, text, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()


def steps(name: str, arguments: dict) -> list[dict]:
    return [
        {"TEXT": "Working on it.", "TOOL_CALLS": [{"id": "call-1", "name": name, "arguments": arguments}]},
        {"TEXT": "Done."},
    ]


def die_after_tool(executor):
    """Kill the run's task (no cleanup: a dead process) right after a tool's outcome is persisted."""

    def receiver(sender, run_id, **kwargs):
        assert executor.abandon(run_id)

    tool_executed.connect(receiver, weak=False, dispatch_uid="die-after-tool")
    return lambda: tool_executed.disconnect(dispatch_uid="die-after-tool")


async def executions(session_id: str) -> list[tuple[str, str, str]]:
    rows_ = ToolExecution.objects.filter(run__session_id=session_id).order_by("id")
    return [(e.run_id, e.name, e.status) async for e in rows_]


@pytest.mark.parametrize("action", ["continue", "regenerate"])
async def test_side_effect_is_not_executed_again_after_a_death(executor, session, use_agents, action):
    use_agents(
        default=agent({"STEPS": steps("create_ticket", {"title": "Printer"})}, tools=[f"{toolbox.PATH}.create_ticket"])
    )
    undo = die_after_tool(executor)
    try:
        first = await executor.execute(session, [user_message("Open a ticket")])
        assert await executor.wait(first.run_id, 10) == "abandoned"
    finally:
        undo()
    dead = await Run.objects.aget(pk=first.run_id)
    assert dead.status == "tooling"  # the process died: nothing ended the run
    assert toolbox.calls["create_ticket"] == 1
    assert await executions(session.id) == [(first.run_id, "create_ticket", "succeeded")]

    if action == "continue":
        handle = await executor.continue_run(session=session, run_id=first.run_id)
    else:
        handle = await executor.regenerate(session=session)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["create_ticket"] == 1  # reused, not executed again
    assert (await Run.objects.aget(pk=first.run_id)).status == "interrupted"
    records = await executions(session.id)
    if action == "continue":
        # The interrupted answer (rebuilt from the stream) holds the call: its persisted result
        # is sent on, and the model is never asked to call the tool again.
        assert records == [(first.run_id, "create_ticket", "succeeded")]
        assert handle.response_message_id == first.response_message_id
    else:
        # A regenerate starts from the last safe checkpoint: the new attempt opens with the
        # completed call and its result, so the model is not asked to call the tool again.
        assert records == [(first.run_id, "create_ticket", "succeeded")]
        assert handle.response_message_id != first.response_message_id
    reply = (await rows(session.id))[-1]
    part = next(p for p in reply["parts"] if p["type"] == "tool-create_ticket")
    assert part["output"]["ticket"] == "T-1"
    assert text(reply).endswith("Done.")


async def test_read_only_tool_may_run_again_after_a_death(executor, session, use_agents):
    use_agents(default=agent({"STEPS": steps("lookup", {"city": "Rome"})}, tools=[f"{toolbox.PATH}.lookup"]))
    undo = die_after_tool(executor)
    try:
        first = await executor.execute(session, [user_message("Weather?")])
        await executor.wait(first.run_id, 10)
    finally:
        undo()
    handle = await executor.regenerate(session=session)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["lookup"] == 2


async def test_crash_inside_a_tool_leaves_it_unknown_and_nothing_reruns_it(executor, session, use_agents):
    use_agents(default=agent({"STEPS": steps("charge_card", {"order": "hang"})}, tools=[f"{toolbox.PATH}.charge_card"]))
    toolbox.gates["started:charge_card"] = threading.Event()
    first = await executor.execute(session, [user_message("Charge my order")])
    assert await asyncio.to_thread(toolbox.gates["started:charge_card"].wait, 10)
    assert executor.abandon(first.run_id)  # the process dies inside the tool
    assert await executor.wait(first.run_id, 10) == "abandoned"
    record = await ToolExecution.objects.aget(run_id=first.run_id)
    assert record.status == "started" and record.result is None and record.idempotency_key == "charge:hang"

    await asyncio.sleep(0.3)  # nothing re-runs it on its own
    assert toolbox.calls["charge_card"] == 1
    assert await Run.objects.filter(session_id=session.id).acount() == 1

    # The user chooses Continue: the dead run is interrupted (its partial answer rebuilt from
    # the stream) and the call's outcome becomes unknown, so Continue is refused until the
    # outcome is resolved (000, "Reconcile before retrying unknown side effects").
    with pytest.raises(RunNotActionableError) as refused:
        await executor.continue_run(session=session, run_id=first.run_id)
    assert refused.value.cause == "tool_outcome_unknown"
    assert toolbox.calls["charge_card"] == 1
    assert await executions(session.id) == [(first.run_id, "charge_card", "unknown")]
    assert (await Run.objects.aget(pk=first.run_id)).status == "interrupted"
    assert await Run.objects.filter(session_id=session.id).acount() == 1


async def test_continue_after_a_committed_tool_step_sends_the_persisted_result(executor, session, use_agents):
    toolbox.RecordingProvider.requests = []
    script = {"STEPS": [*steps("create_ticket", {"title": "Fan"})[:1], {"HANG_AFTER_CHUNKS": 0}, {"TEXT": "Done."}]}
    provider = {"BACKEND": f"{toolbox.PATH}.RecordingProvider", "OPTIONS": script}
    use_agents(default={**agent(tools=[f"{toolbox.PATH}.create_ticket"]), "PROVIDER": provider})
    first = await executor.execute(session, [user_message("Open a ticket")])
    while len(toolbox.RecordingProvider.requests) < 2:  # step 1 committed; step 2 is waiting on the model
        await asyncio.sleep(0.01)
    assert executor.abandon(first.run_id)
    await executor.wait(first.run_id, 10)
    partial = (await rows(session.id))[-1]
    assert next(p for p in partial["parts"] if p["type"] == "tool-create_ticket")["state"] == "output-available"

    use_agents(
        default={
            **agent(tools=[f"{toolbox.PATH}.create_ticket"]),
            "PROVIDER": {**provider, "OPTIONS": {"STEPS": [{"TEXT": "x"}, {"TEXT": "Done."}]}},
        }
    )
    handle = await executor.continue_run(session=session, run_id=first.run_id)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["create_ticket"] == 1
    context = toolbox.RecordingProvider.requests[-1].messages
    assert [m["role"] for m in context] == ["user", "assistant", "tool"]
    assert '"ticket": "T-1"' in context[2]["content"]
    reply = (await rows(session.id))[-1]
    assert reply["id"] == partial["id"]  # the same message, continued
    assert reply["metadata"]["helix"]["partial"] is False
    assert text(reply) == "Working on it.Done."


async def test_regenerate_after_a_crash_inside_a_tool_waits_for_its_resolution(executor, session, use_agents):
    toolbox.RecordingProvider.requests = []
    provider = {
        "BACKEND": f"{toolbox.PATH}.RecordingProvider",
        "OPTIONS": {"STEPS": steps("charge_card", {"order": "hang"})},
    }
    use_agents(default={**agent(tools=[f"{toolbox.PATH}.charge_card"]), "PROVIDER": provider})
    toolbox.gates["started:charge_card"] = threading.Event()
    first = await executor.execute(session, [user_message("Charge my order")])
    assert await asyncio.to_thread(toolbox.gates["started:charge_card"].wait, 10)
    assert executor.abandon(first.run_id)
    await executor.wait(first.run_id, 10)
    with pytest.raises(RunNotActionableError) as refused:
        await executor.regenerate(session=session)
    assert refused.value.cause == "tool_outcome_unknown"
    assert len(toolbox.RecordingProvider.requests) == 1  # no model call since the crash
    assert await executions(session.id) == [(first.run_id, "charge_card", "unknown")]

    # Staff reconcile: it ran, with this result. Regenerate now keeps it (never re-runs it):
    # the new attempt opens with the call and the resolved result.
    record = await ToolExecution.objects.aget(run_id=first.run_id)
    await store.aresolve_tool_execution(record.pk, status="succeeded", result={"charged": "hang"})
    handle = await executor.regenerate(session=session)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["charge_card"] == 1
    assert await executions(session.id) == [(first.run_id, "charge_card", "succeeded")]
    part = next(p for p in (await rows(session.id))[-1]["parts"] if p["type"] == "tool-charge_card")
    assert part["state"] == "output-available" and part["output"] == {"charged": "hang"}
