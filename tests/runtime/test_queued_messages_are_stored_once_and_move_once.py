"""Queued messages in the store: one row per request key, one move out of ``queued``.

The rows the chat route's ``enqueue`` writes (``helix_django.store.queued``): a keyed
repeat finds its row, another input under the key is a conflict, a removal or a start is a
compare-and-set, and the relaunch scan's query finds exactly the sessions with a waiting
message and no live run.
"""

from __future__ import annotations

import pytest

from helix_django.errors import QueuedMessageNotFoundError, QueuedMessageNotQueuedError, RequestKeyConflictError
from helix_django.models import QueuedMessage, Run
from helix_django.store import queued
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def message(text: str, message_id: str = "u_q") -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}], "metadata": {}}


def test_a_keyed_repeat_finds_its_row_and_other_input_under_the_key_conflicts():
    live = InFlight("s-queue-key")
    row, duplicate = queued.enqueue_message(
        live.session_id, message("two"), request_key="key-00000001", input_hash="h1"
    )
    again, repeated = queued.enqueue_message(
        live.session_id, message("two"), request_key="key-00000001", input_hash="h1"
    )
    assert (duplicate, repeated, again.pk) == (False, True, row.pk)
    with pytest.raises(RequestKeyConflictError):
        queued.enqueue_message(live.session_id, message("other"), request_key="key-00000001", input_hash="h2")
    assert QueuedMessage.objects.filter(session_id=live.session_id).count() == 1


def test_a_message_without_a_key_gets_one_of_its_own_and_positions_count_the_waiting_ones():
    live = InFlight("s-queue-minted")
    one, _ = queued.enqueue_message(live.session_id, message("two", "u_2"), request_key=None, input_hash="a")
    two, _ = queued.enqueue_message(live.session_id, message("three", "u_3"), request_key=None, input_hash="b")
    assert one.request_key == f"queued:{one.pk}" and two.request_key == f"queued:{two.pk}"
    assert [queued.queue_position(one), queued.queue_position(two)] == [1, 2]
    queued.remove_queued(live.session_id, one.pk)
    assert queued.queue_position(two) == 1
    assert [row.pk for row in queued.queued_messages(live.session_id)] == [two.pk]


def test_a_message_moves_out_of_queued_once():
    live = InFlight("s-queue-once")
    row, _ = queued.enqueue_message(live.session_id, message("two"), request_key=None, input_hash="a")
    assert queued.mark_started(row.pk, live.run_id) is True
    assert queued.mark_started(row.pk, live.run_id) is False
    assert queued.mark_refused(row.pk, "state_session_full") is False
    with pytest.raises(QueuedMessageNotQueuedError) as refused:
        queued.remove_queued(live.session_id, row.pk)
    assert refused.value.to_body()["cause"] == "started" and refused.value.to_body()["runId"] == live.run_id
    with pytest.raises(QueuedMessageNotFoundError):
        queued.remove_queued("s-another-session", row.pk)


def test_the_scan_finds_only_sessions_with_a_waiting_message_and_no_live_run():
    busy = InFlight("s-queue-busy")
    idle = InFlight("s-queue-idle")
    Run.objects.filter(pk=idle.run_id).update(status="completed")
    nothing = InFlight("s-queue-nothing")
    Run.objects.filter(pk=nothing.run_id).update(status="completed")
    for session_id in (busy.session_id, idle.session_id):
        queued.enqueue_message(session_id, message("next"), request_key=None, input_hash="a")
    assert queued.sessions_waiting_to_start() == [idle.session_id]
