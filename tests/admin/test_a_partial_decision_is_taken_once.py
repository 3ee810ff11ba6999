"""Keep partial / Discard partial submitted twice at once: the decision is taken, logged and signalled once.

Found by review (sixteenth session): two submits of Keep partial (a double click, two staff
members) both passed the inventory before either wrote, so both recorded the action, both
sent ``recovery_action_taken`` and both logged it. The decision is now a compare-and-set
(``store.claim_partial_decision``): the second is refused with the typed
RunNotActionableError, nothing written twice.
"""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import async_to_sync

from helix_django.errors import RunNotActionableError
from helix_django.models import Message
from helix_django.recovery import actions
from helix_django.recovery import inventory as inv
from helix_django.runtime.executor import get_executor
from helix_django.signals import recovery_action_taken
from tests.admin.test_actions import interrupted

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def _submit_twice_at_once(run_id: str, action: str, monkeypatch) -> list[object]:
    """Two submits in two threads (two admin requests); both pass the inventory before either writes."""
    both_checked = threading.Barrier(2, timeout=10)
    inventory = inv.inventory

    def inventory_then_wait(run):
        offers = inventory(run)
        both_checked.wait()
        return offers

    monkeypatch.setattr(inv, "inventory", inventory_then_wait)
    results: list[object] = [None, None]

    def submit(index: int) -> None:
        try:
            results[index] = async_to_sync(actions.aperform)(action, run_id, executor=get_executor())
        except RunNotActionableError as exc:
            results[index] = exc

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results


@pytest.mark.parametrize("action", [inv.KEEP_PARTIAL, inv.DISCARD_PARTIAL])
def test_two_submits_at_once_take_the_decision_once(action, monkeypatch):
    flight = interrupted(f"s-twice-{action[:4]}")
    signalled: list[str] = []

    def receiver(sender, run, action, outcome, **kwargs):
        signalled.append(outcome)

    recovery_action_taken.connect(receiver, weak=False)
    try:
        results = _submit_twice_at_once(flight.run_id, action, monkeypatch)
    finally:
        recovery_action_taken.disconnect(receiver)

    done = [r for r in results if isinstance(r, actions.ActionResult)]
    refused = [r for r in results if isinstance(r, RunNotActionableError)]
    assert len(done) == 1 and len(refused) == 1, results
    assert refused[0].code == "state_run_not_actionable" and refused[0].cause == action
    assert signalled == [done[0].outcome]
    assert flight.run.recovery_action == action
    in_conversation = Message.objects.filter(session_id=flight.session_id, position__isnull=False).count()
    assert in_conversation == flight.run.session.message_count == (2 if action == inv.KEEP_PARTIAL else 1)
    assert Message.objects.filter(session_id=flight.session_id, position__isnull=True).count() == (
        0 if action == inv.KEEP_PARTIAL else 1
    )
