"""A generation that *Check status* completed from the provider is told completed on every wire.

Seen: a run the relaunch scan marked ``interrupted`` (its provider operation was still in
progress) and that staff then completed with *Check status* (the provider had finished:
``acomplete_from_provider``) was told two ways. The raw stream route and the WebSocket
ended ``end {status: "completed"}``; the chat route, resumed with a cursor inside the run
(also ``GET chat/<id>/stream``), replayed the run's old ``run_interrupted`` error chunk
and ended on it, never ``[DONE]``, although the run, the snapshot and the admin say
completed. Expected (docs/transport.md, "Endings"): the ending the run ended with:
``[DONE]``, after the ``data-stream-resync`` that tells the client to reload the snapshot.

On every stream manager (memory, database, Redis: the ``backend`` fixture).
"""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.management import call_command
from django.utils.module_loading import import_string

from helix_django.models import ChatSession, Run
from helix_django.recovery import inventory as inv
from helix_django.recovery.actions import aperform
from helix_django.streams import get_stream_manager
from helix_django.streams.reader import ResumableReader
from helix_django.transport.chat_request import ChatRequest
from helix_django.transport.frames import stream_frames
from helix_django.transport.plan import plan_frames
from helix_django.transport.resume import plan_resume
from helix_django.transport.resume_reads import read_resume_state
from tests.recovery.factories import InFlight, durable_agents, start_operation
from tests.transport import conftest as transport

pytestmark = pytest.mark.django_db(transaction=True)
backend = transport.backend  # fixture: (name, STREAM_MANAGERS entry) of every stream manager


def reconciled_run(settings, backend, session_id: str) -> Run:
    options = {"TEXT": "The provider finished this answer while we were down.", "PACE_TPS": 8}
    settings.HELIX = {**durable_agents(**options), "STREAM_MANAGERS": {"default": backend[1]}}
    used = type(get_stream_manager())
    assert used is import_string(backend[1]["BACKEND"])  # the configured manager serves this test
    flight = InFlight(session_id, operation_id=start_operation(options))
    flight.stream_text("The provider")
    flight.expire()
    call_command("helix_recover")
    assert flight.run.status == "interrupted"
    time.sleep(1.5)  # the scripted operation finishes meanwhile
    async_to_sync(aperform)(inv.CHECK_STATUS, flight.run_id)
    run = flight.run
    assert run.status == "completed"
    return run


async def chat_ending(run: Run) -> list[str]:
    state = await sync_to_async(read_resume_state)(run.session_id, None)
    plan = await plan_resume(ChatRequest(session_id=run.session_id, method="GET", cursor=run.start_sequence + 1), state)
    body = b"".join([part async for part in plan_frames(plan)]).decode()
    return [line[6:] for line in body.splitlines() if line.startswith("data: ")]


async def raw_ending(run: Run) -> dict:
    manager = get_stream_manager()
    info = await manager.get_info(run.session_id)
    reader = ResumableReader(
        manager, run.session_id, from_sequence=run.start_sequence + 1, wait_for_live=False, info=info
    )
    return [frame async for frame in stream_frames(reader)][-1]


def test_a_run_completed_by_check_status_ends_done_on_the_chat_route_as_on_the_raw_stream(settings, backend):
    run = reconciled_run(settings, backend, "s-reconciled-wire")
    assert ChatSession.objects.get(pk=run.session_id).current_run_id == run.id
    assert async_to_sync(raw_ending)(run) == {"type": "end", "status": "completed"}
    told = async_to_sync(chat_ending)(run)
    assert told[-1] == "[DONE]", told[-3:]
    chunks = [json.loads(data) for data in told if data != "[DONE]"]
    assert not any(chunk["type"] == "error" for chunk in chunks)
    assert any(chunk["type"] == "data-stream-resync" for chunk in chunks)


async def raw_frames(run: Run) -> list[dict]:
    manager = get_stream_manager()
    info = await manager.get_info(run.session_id)
    reader = ResumableReader(
        manager, run.session_id, from_sequence=run.start_sequence + 1, wait_for_live=False, info=info
    )
    return [frame async for frame in stream_frames(reader)]


def test_the_raw_stream_and_the_websocket_pass_on_the_resync_of_a_reconciled_run(settings, backend):
    """The run's text on the stream is the partial one: only ``data-stream-resync`` says the answer is in the snapshot."""
    run = reconciled_run(settings, backend, "s-reconciled-raw")
    frames = async_to_sync(raw_frames)(run)
    assert frames[-1] == {"type": "end", "status": "completed"}
    kinds = [frame["chunk"]["type"] for frame in frames if frame["type"] == "chunk"]
    assert "data-stream-resync" in kinds, kinds
