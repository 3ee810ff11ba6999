"""A send that finds a dead run in its session ends that run as the relaunch scan would.

docs/transport.md, "Endings": a forced reconcile never contradicts an ending a client saw
(a ``finish`` written before the fence ends the run ``completed``), and 000 / recovery/scan.py:
a cancel request recorded before the process died keeps the run ``cancelled``. The scan
(`helix_recover`, the startup scan, the admin's Check status) decides so
(tests/recovery/test_scan.py::test_finished_output_without_terminal_commit_is_completed,
::test_cancel_requested_before_death_stays_cancelled).

The same dead run met by a new send (``runtime/retirement.py``, ``aretire_if_dead``) is ended
by the same decision: these tests fail where a send ends every dead run ``interrupted``
(``cause: process_lost``), which tells a client that read the answer's ``finish`` a partial
output and a Stop the user made as an interruption.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from helix_django.models import Run
from helix_django.recovery.scan import arecover
from helix_django.runtime.executor import get_executor
from helix_django.snapshot import abuild_snapshot  # noqa: F401
from tests.recovery.factories import InFlight
from tests.runtime.conftest import agent, helix

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def finished_but_not_committed(session_id: str) -> InFlight:
    """A run whose process wrote its whole answer and ``finish``, then died before the terminal commit
    (runtime/endings.py ``_complete_in_steps`` on the memory and Redis managers: append, then commit)."""
    flight = InFlight(session_id)
    flight.stream_text("All done.")
    flight.write(
        [{"type": "text-end", "id": "t1"}, {"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}]
    )
    flight.expire()
    return flight


def cancelled_before_death(session_id: str) -> InFlight:
    flight = InFlight(session_id)
    flight.stream_text("Partial answer")
    Run.objects.filter(pk=flight.run_id).update(cancel_requested_at=timezone.now(), cancelled_by="user")
    flight.expire()
    return flight


def send_again(session_id: str) -> None:
    from helix_django.models import ChatSession

    async def go():
        executor = get_executor()
        session = await ChatSession.objects.aget(pk=session_id)
        handle = await executor.execute(
            session, [{"id": f"u2-{session_id}", "role": "user", "parts": [{"type": "text", "text": "again"}]}]
        )
        await executor.wait(handle.run_id, 10)

    async_to_sync(go)()


CASES = {
    "finished": (finished_but_not_committed, "completed"),
    "cancel_requested": (cancelled_before_death, "cancelled"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_scan_and_a_send_decide_a_dead_run_alike(settings, case):
    settings.HELIX = helix(default=agent({"TEXT": "Second answer."}))
    build, expected = CASES[case]
    scanned = build(f"s-scan-{case}")
    async_to_sync(arecover)()
    assert scanned.run.status == expected  # what the scan decides (holds today)

    met = build(f"s-send-{case}")
    send_again(f"s-send-{case}")
    assert met.run.status == expected, (met.run.status, met.run.error_code)
