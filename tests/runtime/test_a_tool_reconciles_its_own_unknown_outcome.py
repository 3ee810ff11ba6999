"""A side-effecting tool that declares ``reconcile`` is asked about its own unknown outcome before staff are.

The process dies inside ``charge_card_reconciled`` (its execution stays ``started``); the
user's Continue or Regenerate finds the outcome unknown. The tool's ``reconcile`` asks "the
payment provider" (a ledger keyed by the execution's idempotency key): an effect that
happened is recorded ``succeeded`` with its result and never run again; one that did not is
recorded ``failed`` (``not_executed``) and the redo may run it, once; no answer, a failure
or a timeout leave it unknown and the redo is refused as before (000, "Reconcile before
retrying unknown side effects").
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from helix_django.errors import RunNotActionableError
from helix_django.models import ToolExecution
from helix_django.runtime import tool_reconcile
from helix_django.runtime.tool_reconcile import Reconciled
from helix_django.runtime.tools import tool
from tests.runtime import toolbox
from tests.runtime.conftest import agent, rows, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

KEY = "recharge:A-7"
STEPS = [
    {
        "TEXT": "Charging.",
        "TOOL_CALLS": [{"id": "call-1", "name": "charge_card_reconciled", "arguments": {"order": "A-7"}}],
    },
    {"TEXT": "Done."},
]


@pytest.fixture(autouse=True)
def _reset_tools():
    toolbox.reset()


async def die_inside_the_tool(executor, session, use_agents) -> str:
    use_agents(default=agent({"STEPS": STEPS}, tools=[f"{toolbox.PATH}.charge_card_reconciled"]))
    toolbox.gates["started:charge_card_reconciled"] = threading.Event()
    first = await executor.execute(session, [user_message("Charge order A-7")])
    assert await asyncio.to_thread(toolbox.gates["started:charge_card_reconciled"].wait, 10)
    assert executor.abandon(first.run_id)  # the process dies inside the tool
    assert await executor.wait(first.run_id, 10) == "abandoned"
    return first.run_id


async def the_first_execution(run_id: str) -> ToolExecution:
    return await ToolExecution.objects.aget(run_id=run_id)


async def test_an_effect_the_tool_finds_executed_is_recorded_and_never_run_again(executor, session, use_agents):
    first = await die_inside_the_tool(executor, session, use_agents)
    toolbox.ledger[KEY] = Reconciled(happened=True, result={"charged": "A-7", "receipt": "R-1"})
    handle = await executor.continue_run(session=session, run_id=first)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["charge_card_reconciled"] == 1 and toolbox.calls["reconcile"] == 1
    record = await the_first_execution(first)
    assert (record.status, record.error_code, record.result) == (
        "succeeded",
        "reconciled",
        {"charged": "A-7", "receipt": "R-1"},
    )
    reply = (await rows(session.id))[-1]
    part = next(p for p in reply["parts"] if p["type"] == "tool-charge_card_reconciled")
    assert part["output"] == {"charged": "A-7", "receipt": "R-1"}


async def test_an_effect_the_tool_finds_not_executed_runs_once_in_the_redo(executor, session, use_agents):
    first = await die_inside_the_tool(executor, session, use_agents)
    toolbox.ledger[KEY] = Reconciled(happened=False)
    handle = await executor.regenerate(session=session)
    assert await executor.wait(handle.run_id, 10) == "completed"
    assert toolbox.calls["charge_card_reconciled"] == 2  # the one that never happened, then the redo's
    record = await the_first_execution(first)
    assert (record.status, record.error_code) == ("failed", "reconciled_not_executed")
    redo = await ToolExecution.objects.aget(run_id=handle.run_id)
    assert (redo.status, redo.result) == ("succeeded", {"charged": "A-7", "attempt": 2})


@pytest.mark.parametrize("answer", [None, "raise", "hang"])
async def test_no_answer_a_failure_or_a_timeout_leave_it_unknown_for_staff(
    executor, session, use_agents, monkeypatch, answer
):
    monkeypatch.setattr(tool_reconcile, "RECONCILE_SECONDS", 0.3)
    first = await die_inside_the_tool(executor, session, use_agents)
    toolbox.ledger[KEY] = answer
    with pytest.raises(RunNotActionableError) as refused:
        await executor.continue_run(session=session, run_id=first)
    assert refused.value.cause == "tool_outcome_unknown"
    assert toolbox.calls["reconcile"] == 1 and toolbox.calls["charge_card_reconciled"] == 1
    assert (await the_first_execution(first)).status == "unknown"


def test_only_a_side_effecting_tool_declares_reconcile():
    with pytest.raises(ValueError, match="side_effect"):

        @tool(effect="idempotent", reconcile=toolbox.ask_the_ledger)
        def set_flag(name: str) -> dict:
            return {"name": name}


async def test_the_relaunch_scan_asks_the_tool_before_staff_see_the_run(executor, session, use_agents):
    from datetime import timedelta

    from django.utils import timezone

    from helix_django.models import Run
    from helix_django.recovery.scan import arecover

    first = await die_inside_the_tool(executor, session, use_agents)
    toolbox.ledger[KEY] = Reconciled(happened=True, result={"charged": "A-7", "receipt": "R-2"})
    await Run.objects.filter(pk=first).aupdate(lease_expires_at=timezone.now() - timedelta(seconds=5))
    report = await arecover(executor=executor)
    assert [(d.run_id, d.outcome) for d in report.decisions] == [(first, "interrupted")]
    record = await the_first_execution(first)
    assert (record.status, record.error_code) == ("succeeded", "reconciled")
    assert toolbox.calls["charge_card_reconciled"] == 1 and toolbox.calls["reconcile"] == 1
