"""A run that recovery or a detached Stop ends tells its partial message's ``helix`` status on the wire.

Seen: a run stopped while no task of the process executes it (paused for a client tool;
running on another process or a task worker: ``runtime/entries.py::_cancel_detached``)
or marked interrupted by recovery ended its stream with ``helix-run-end`` only. The AI
SDK stream said ``abort`` (which the SDK ignores) or the typed error, but never the
``message-metadata`` chunk that a Stop of a local run sends: ``messageMetadata.helix =
{runId, status: "cancelled", partial: true, cancelledBy}``; the client's message kept the
metadata of a run in progress while the snapshot said cancelled / interrupted, partial.
Expected (docs/transport.md, "Endings"): the partial message's ``messageMetadata.helix``
says the ending and who stopped it, on the wire as in the snapshot.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.management import call_command

from helix_django.models import CancelledBy
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.runtime.executor import get_executor
from helix_django.snapshot import build_snapshot
from helix_django.streams import get_stream_manager
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.plan import plan_frames
from helix_django.transport.resume import plan_resume
from helix_django.transport.resume_reads import read_resume_state
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


async def chat_chunks(session_id: str, cursor: int) -> list[dict]:
    state = await sync_to_async(read_resume_state)(session_id, None)
    plan = await plan_resume(ChatRequest(session_id=session_id, method="GET", cursor=cursor), state)
    body = b"".join([part async for part in plan_frames(plan)]).decode()
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def told_metadata(session_id: str, cursor: int) -> dict | None:
    chunks = async_to_sync(chat_chunks)(session_id, cursor)
    metadata = [c["messageMetadata"]["helix"] for c in chunks if c["type"] == "message-metadata"]
    return metadata[-1] if metadata else None


def snapshot_metadata(session_id: str) -> dict:
    answer = [m for m in build_snapshot(session_id)["messages"] if m["role"] == "assistant"][-1]
    return answer["metadata"]["helix"]


def test_a_staff_cancel_of_a_run_no_task_executes_tells_cancelled_by_staff():
    flight = InFlight("s-told-cancel")
    flight.stream_text("Half of an answer")
    async_to_sync(aperform)(
        inv.CANCEL, flight.run_id, executor=get_executor()
    )  # no task of this process executes it: detached
    assert flight.run.status == "cancelled" and flight.run.cancelled_by == CancelledBy.STAFF
    expected = snapshot_metadata("s-told-cancel")
    assert expected["status"] == "cancelled" and expected["cancelledBy"] == "staff"
    assert told_metadata("s-told-cancel", flight.run.start_sequence) == expected


def test_a_run_the_scan_marks_interrupted_tells_interrupted_partial():
    flight = InFlight("s-told-interrupted")
    flight.stream_text("Half of an answer")
    flight.expire()
    call_command("helix_recover")
    assert flight.run.status == "interrupted"
    expected = snapshot_metadata("s-told-interrupted")
    assert expected == {"runId": flight.run_id, "status": "interrupted", "partial": True}
    chunks = async_to_sync(get_stream_manager().read_all)("s-told-interrupted")
    told = [c["messageMetadata"]["helix"] for _s, c in chunks if c["type"] == "message-metadata"]
    assert told[-1:] == [expected]
