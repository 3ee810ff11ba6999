"""A Stop that reaches a run's loop as the run opens ends it ``cancelled``; an abandon there retires it.

``executor.cancel()`` sets the run's ``is_cancel_requested`` and then, on the run's loop,
cancels its task (``cancels.stop_started_task``). The run's body waits one loop round
before its first step (a send's first byte goes first), and that round is where such a
cancel lands; a task cancelled before its first step would run none of its code, so a
Stop leaves a task that has not started to see the request at its start. Found by a
review of the thirteenth session: the round's first version ended such a run
``abandoned``, live until its lease expired.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django.models import Run, RunStatus
from helix_django.runtime.cancels import stop_started_task
from tests.runtime.conftest import agent, user_message

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def stop_when_the_task_starts(executor, monkeypatch, *, at_once: bool, action) -> None:
    """Run ``action(entry)`` right after a run's task is created: at once (before its first step) or a round later."""
    original = executor.runs.start_task

    def starting(entry, loop):
        original(entry, loop)
        if at_once:
            action(entry)
        else:
            asyncio.get_running_loop().call_soon(action, entry)

    monkeypatch.setattr(executor.runs, "start_task", starting)


def stop(entry) -> None:
    """What executor.cancel() does on the run's loop once its hop recorded the request."""
    entry.loop.is_cancel_requested = True
    stop_started_task(entry)


@pytest.mark.parametrize("at_once", [True, False], ids=["before the first step", "in the first round"])
async def test_a_stop_as_the_run_opens_ends_it_cancelled(executor, session, use_agents, monkeypatch, at_once):
    use_agents(default=agent({"TEXT": "one two three", "PACE_TPS": 50}))
    stop_when_the_task_starts(executor, monkeypatch, at_once=at_once, action=stop)
    handle = await executor.execute(session, [user_message("stop me")])
    status = await executor.wait(handle.run_id, 20)
    run = await Run.objects.aget(pk=handle.run_id)
    assert (status, run.status) == (RunStatus.CANCELLED, RunStatus.CANCELLED)


async def test_a_task_cancelled_before_its_first_step_is_retired_abandoned(executor, session, use_agents, monkeypatch):
    use_agents(default=agent({"TEXT": "one two three", "PACE_TPS": 50}))
    stop_when_the_task_starts(executor, monkeypatch, at_once=True, action=lambda entry: entry.task.cancel())
    handle = await executor.execute(session, [user_message("leave me")])
    assert await executor.wait(handle.run_id, 5) == "abandoned"  # its drive never ran: retired all the same
    assert handle.run_id not in executor.runs._entries
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.is_live  # left to its lease and the relaunch scan, as a dying process leaves it
