"""Check status is not offered on an interrupted generation a later run already resolved.

A Regenerate (or Continue, or a new message) records the run that followed in the
interrupted run (``Run.resolved_by``) and cancels the operation it left; asking the
provider about that operation afterwards could only complete an answer the conversation
has moved past. The inventory says so, and performing it is refused the same way
(000, "Recovery actions": an action is offered only where it applies).
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from helix_django import store
from helix_django.errors import RunNotActionableError
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.recovery.scan import arecover_run
from tests.recovery.factories import InFlight, durable_agents, start_operation

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = {"TEXT": "An answer a later run replaced.", "PACE_TPS": 5, "CACHE_ALIAS": "helix"}


@pytest.fixture
def durable(settings):
    settings.HELIX = {**settings.HELIX, **durable_agents(**OPTIONS)}


def interrupted_with_an_operation(session_id: str) -> InFlight:
    flight = InFlight(session_id, operation_id=start_operation({"DURABLE": True, **OPTIONS}))
    flight.stream_text("An answer")
    flight.expire()
    assert async_to_sync(arecover_run)(flight.run_id).outcome == "interrupted"
    return flight


def test_an_unresolved_interrupted_generation_offers_check_status(durable):
    flight = interrupted_with_an_operation("s-check-open")
    assert inv.inventory(flight.run)[inv.CHECK_STATUS].is_available


def test_a_generation_a_later_run_resolved_is_not_checked_again(durable):
    flight = interrupted_with_an_operation("s-check-resolved")
    assert store.record_resolution(flight.run_id, inv.REGENERATE, by_run_id="run_that_followed")

    offer = inv.inventory(flight.run)[inv.CHECK_STATUS]
    assert not offer.is_available
    assert "later" in str(offer.reason)
    with pytest.raises(RunNotActionableError):
        async_to_sync(aperform)(inv.CHECK_STATUS, flight.run_id)
    assert flight.run.status == "interrupted"
