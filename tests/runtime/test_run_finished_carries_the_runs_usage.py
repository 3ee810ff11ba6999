"""The ``run_finished`` signal carries the run's usage as its terminal commit stored it, whatever the ending."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from helix_django.models import Run
from helix_django.recovery.scan import arecover
from helix_django.runtime.providers.scripted import tokenize
from helix_django.signals import run_finished
from tests.runtime.conftest import agent, stream_chunks, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

ANSWER = "The weather in Oslo is mild today, with light wind from the west."


@pytest.fixture
def finished():
    received: list[dict] = []

    async def receiver(sender, run, status="", usage=None, **kwargs):
        received.append({"run_id": run.id, "status": status, "usage": usage})

    run_finished.connect(receiver, dispatch_uid="test_run_finished_usage")
    yield received
    run_finished.disconnect(dispatch_uid="test_run_finished_usage")


async def test_a_completed_runs_signal_carries_its_usage(executor, session, use_agents, finished):
    use_agents(default=agent({"TEXT": ANSWER, "PACE_TPS": 0}))
    handle = await executor.execute(session, [user_message("Weather?")])
    assert await executor.wait(handle.run_id, 10) == "completed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert [f for f in finished if f["run_id"] == run.id] == [
        {"run_id": run.id, "status": "completed", "usage": run.usage}
    ]
    assert run.usage["source"] == "reported" and run.usage["outputTokens"] > 0


async def test_a_run_the_relaunch_scan_ends_carries_its_estimated_usage(executor, session, use_agents, finished):
    use_agents(default=agent({"TEXT": ANSWER, "HANG_AFTER_CHUNKS": 6}))
    handle = await executor.execute(session, [user_message("Weather?")])
    for _ in range(200):  # six words streamed and stored, then the call hangs
        deltas = [chunk["delta"] for _, chunk in await stream_chunks(session.id) if chunk["type"] == "text-delta"]
        if "".join(deltas) == "".join(tokenize(ANSWER)[:6]):
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the six words were not stored")
    assert executor.abandon(handle.run_id)  # the process dies inside the model call
    await Run.objects.filter(pk=handle.run_id).aupdate(lease_expires_at=timezone.now() - timedelta(seconds=5))
    await arecover()
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.status == "interrupted"
    assert [f for f in finished if f["run_id"] == run.id] == [
        {"run_id": run.id, "status": "interrupted", "usage": run.usage}
    ]
    assert run.usage["source"] == "estimated" and run.usage["estimatedTokens"] > 0
