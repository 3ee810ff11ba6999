"""A provider operation whose run is given up is cancelled at the provider, and the answer recorded.

Seen: staff's *Mark interrupted* ended a live run without cancelling its durable provider
operation (still generating 5 s later), and a Regenerate then started a second operation
beside it. A run ended without asking the provider (staff, a stopping process, a send that
retires a dead run) cancels its operation; a redo (Regenerate, Continue) of an interrupted run
whose operation may still run cancels it before the new generation starts.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.recovery.scan import arecover_run
from helix_django.runtime.executor import get_executor
from helix_django.runtime.providers.scripted import ScriptedProvider
from tests.recovery.factories import InFlight, durable_agents, start_operation

pytestmark = [pytest.mark.django_db(transaction=True)]

SLOW = {"TEXT": "a long durable answer " * 20, "PACE_TPS": 5, "CACHE_ALIAS": "helix"}


def _status(operation_id: str) -> str:
    return async_to_sync(ScriptedProvider({"DURABLE": True, **SLOW}).retrieve)(operation_id).status


def test_mark_interrupted_cancels_the_runs_operation(settings):
    settings.HELIX = {**settings.HELIX, **durable_agents(**SLOW)}
    operation = start_operation(SLOW)
    flight = InFlight("s-staff", operation_id=operation)
    flight.stream_text("a long")
    assert _status(operation) == "in_progress"

    decision = async_to_sync(arecover_run)(flight.run_id, force=True, query_provider=False)
    assert decision.outcome == "interrupted"
    assert _status(operation) == "cancelled"
    assert flight.run.provider_cancel_result == "cancelled"


def test_a_regenerate_cancels_the_operation_its_interrupted_run_left_running(settings):
    settings.HELIX = {**settings.HELIX, **durable_agents(**SLOW)}
    operation = start_operation(SLOW)
    flight = InFlight("s-redo", operation_id=operation)
    flight.stream_text("a long")
    flight.expire()
    assert async_to_sync(arecover_run)(flight.run_id).reason == "provider_in_progress"
    assert _status(operation) == "in_progress"  # kept for Check status

    async_to_sync(aperform)(inv.REGENERATE, flight.run_id, executor=get_executor())
    assert _status(operation) == "cancelled"
    assert flight.run.provider_cancel_result == "cancelled"
