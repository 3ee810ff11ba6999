"""A session owner's Check status over daphne: offered on their interrupted generation, answered from the provider.

The scripted provider in durable mode keeps its operations in the shared Redis cache, so
the test process starts an operation (as a process that then died would) and the server
answers Check status from the provider's word: completed -> the run completes with the
provider's full text; still running -> it stays interrupted, with the reason.
"""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync

from helix_django.models import Message, Run
from helix_django.recovery.scan import arecover_run
from helix_django.runtime.providers.scripted import ScriptedProvider
from tests.live import LiveServer
from tests.recovery.factories import InFlight, durable_agents, start_operation
from tests.transport.conftest import PREFIX, agent_settings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TEXT = "A durable answer the provider finished while nobody listened."
DURABLE = {"DURABLE": True, "TEXT": TEXT, "PACE_TPS": 5, "CACHE_ALIAS": "helix"}


@pytest.fixture(scope="module")
def durable_server(django_db_setup, django_db_blocker):
    """One server per module whose default agent is the durable scripted provider (operations in Redis)."""
    with django_db_blocker.unblock():
        server = LiveServer(helix={**agent_settings(**DURABLE), "OPERATION_WAIT_SECONDS": 0}).start()
    yield server
    server.stop()


@pytest.fixture
def durable(settings):
    settings.HELIX = {**settings.HELIX, **durable_agents(**{k: v for k, v in DURABLE.items() if k != "DURABLE"})}


def run_url(server, sid: str, run_id: str, action: str) -> str:
    return server.url(f"{PREFIX}/sessions/{sid}/runs/{run_id}/{action}")


def operation_status(operation_id: str) -> str:
    return async_to_sync(ScriptedProvider(DURABLE).retrieve)(operation_id).status


def interrupted_while_generating(users, sid: str) -> tuple[InFlight, str]:
    """The owner ``a``'s run, interrupted by the scan while its durable operation still generates."""
    operation = start_operation(DURABLE)
    flight = InFlight(sid, owner=users["a"][0], operation_id=operation)
    flight.stream_text("A durable")
    flight.expire()
    assert async_to_sync(arecover_run)(flight.run_id).reason == "provider_in_progress"
    return flight, operation


def wait_until_finished(operation: str) -> None:
    deadline = time.monotonic() + 30
    while operation_status(operation) != "completed":
        assert time.monotonic() < deadline, "the scripted operation never finished"
        time.sleep(0.1)


def test_check_status_completes_an_interrupted_answer_the_provider_finished(durable_server, durable, users, api):
    a = api("a")
    flight, operation = interrupted_while_generating(users, "s-owner-check")
    inventory = a.get(run_url(durable_server, flight.session_id, flight.run_id, "recovery")).json()
    assert inventory["status"] == "interrupted"
    assert inventory["actions"]["check_status"] == {"available": True, "reason": ""}

    still = a.post(run_url(durable_server, flight.session_id, flight.run_id, "check_status"))
    assert still.status_code == 200, still.text
    assert still.json() == {
        "action": "check_status",
        "runId": flight.run_id,
        "outcome": "provider_in_progress",
        "newRunId": "",
    }
    assert flight.run.status == "interrupted"

    wait_until_finished(operation)
    done = a.post(run_url(durable_server, flight.session_id, flight.run_id, "check_status"))
    assert done.status_code == 200 and done.json()["outcome"] == "completed"
    run = flight.run
    assert run.status == "completed" and run.recovery_action == "check_status"
    assert Message.objects.get(session_id=flight.session_id, position=1).text == TEXT  # the provider's full text
    after = a.get(run_url(durable_server, flight.session_id, flight.run_id, "recovery")).json()
    assert after["actions"]["check_status"] == {"available": False, "reason": "The generation already ended."}
    refused = a.post(run_url(durable_server, flight.session_id, flight.run_id, "check_status"))
    assert refused.status_code == 409
    assert refused.json()["code"] == "state_run_not_actionable" and refused.json()["cause"] == "check_status"


def test_a_stranger_gets_404_and_a_live_run_is_refused(durable_server, durable, users, api):
    flight, _operation = interrupted_while_generating(users, "s-owner-check-b")
    foreign = api("b").post(run_url(durable_server, flight.session_id, flight.run_id, "check_status"))
    assert foreign.status_code == 404 and foreign.json()["code"] == "state_session_not_found"
    assert flight.run.status == "interrupted" and flight.run.recovery_action == ""

    live = InFlight("s-owner-check-live", owner=users["a"][0], operation_id=start_operation(DURABLE))
    a = api("a")
    offer = a.get(run_url(durable_server, live.session_id, live.run_id, "recovery")).json()["actions"]["check_status"]
    assert offer == {
        "available": False,
        "reason": "The generation is still running (its process renews its lease).",
    }
    refused = a.post(run_url(durable_server, live.session_id, live.run_id, "check_status"))
    assert refused.status_code == 409 and refused.json()["cause"] == "check_status"
    assert refused.json()["error"] == offer["reason"]
    assert Run.objects.get(pk=live.run_id).status == "streaming"
