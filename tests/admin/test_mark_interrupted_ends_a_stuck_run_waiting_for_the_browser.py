"""*Mark interrupted* on a generation stuck waiting for the browser's client-tool result.

Seen: the support console lists a run paused for a client tool that went silent for
``STUCK_AFTER_SECONDS`` as stuck and offers *Mark interrupted* on it (the inventory counts
``suspended_client_tool`` as live); pressing it said "Mark interrupted done", logged
"Mark interrupted -> skipped" and recorded ``recovery_action = mark_interrupted``, but
the run stayed ``suspended_client_tool`` (the scan skips it as ``not_in_flight``): the
stuck run was never reconciled and the page said it was. Expected: the run ends
``interrupted``, its partial text kept, its stream failed typed (docs/support.md, "What each
action does": *Mark interrupted* ends a running or stuck run).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from helix_django.models import Run
from helix_django.recovery import inventory as inv
from helix_django.store import leases
from helix_django.streams import get_stream_manager
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def stuck_waiting_for_the_browser(session_id: str) -> InFlight:
    flight = InFlight(session_id)
    flight.stream_text("Let me ask you")
    flight.write(
        [
            {"type": "text-end", "id": "t1"},
            {"type": "tool-input-available", "toolCallId": "call_c", "toolName": "pick_color", "input": {}},
            {"type": "finish-step"},
            {"type": "helix-run-end", "status": "suspended"},
        ]
    )
    async_to_sync(get_stream_manager().pause_stream)(session_id, flight.run_id)
    silent = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=flight.run_id).update(status="suspended_client_tool", last_event_at=silent)
    return flight


def test_mark_interrupted_ends_a_stuck_run_that_waits_for_a_client_tool(staff_client):
    flight = stuck_waiting_for_the_browser("s-stuck-paused")
    assert Run.objects.filter(leases.stuck_q(), pk=flight.run_id).exists()  # listed as stuck
    assert inv.inventory(flight.run)[inv.MARK_INTERRUPTED].is_available  # and offered the action
    url = reverse("admin:helix_django_run_recovery", args=[quote(flight.run_id), inv.MARK_INTERRUPTED])
    page = staff_client.post(url, follow=True).content.decode()
    run = flight.run
    notes = [e.get_change_message() for e in LogEntry.objects.filter(object_id=flight.run_id)]
    assert (run.status, notes) == ("interrupted", ["Recovery action: Mark interrupted -> interrupted"]), page
    info = async_to_sync(get_stream_manager().get_info)("s-stuck-paused")
    assert info.status == "failed" and info.error["code"] == "run_interrupted"


async def test_the_chat_route_tells_the_marked_run_interrupted_not_done():
    """A resume with a cursor inside the marked run ends with its typed error, never the suspended ``[DONE]``."""
    import json

    from asgiref.sync import sync_to_async

    from helix_django.models import ChatSession
    from helix_django.recovery.actions import aperform
    from helix_django.transport.chat_request import ChatRequest
    from helix_django.transport.plan import plan_frames
    from helix_django.transport.resume import plan_resume
    from helix_django.transport.resume_reads import read_resume_state

    flight = await sync_to_async(stuck_waiting_for_the_browser)("s-stuck-paused-wire")
    await aperform(inv.MARK_INTERRUPTED, flight.run_id)
    run = await Run.objects.aget(pk=flight.run_id)
    assert run.status == "interrupted"
    session = await ChatSession.objects.aget(pk="s-stuck-paused-wire")
    state = await sync_to_async(read_resume_state)(session.id, None)
    request = ChatRequest(session_id=session.id, method="GET", cursor=run.start_sequence + 1)
    try:
        plan = await plan_resume(request, state)
        frames = b"".join([part async for part in plan_frames(plan)]).decode()
        told = [line[6:] for line in frames.splitlines() if line.startswith("data: ")][-1]
        assert told != "[DONE]"
        assert json.loads(json.loads(told)["errorText"])["code"] == "run_interrupted"
    except Exception as exc:  # a typed refusal (409 stream_failed) is as truthful
        from helix_django.errors import HelixError

        assert isinstance(exc, HelixError) and exc.to_body()["code"] == "run_interrupted", exc
