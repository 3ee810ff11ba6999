"""The chat route's ending of each run status, told truthfully (issue 17; docs/transport.md, "Endings").

``plan_frames`` over each stream manager (memory, database, Redis: the ``manager`` fixture
of the stream-manager contract suite) with the chunks each ending writes
(runtime/endings.py, recovery/outcomes.py): an interrupted or failed run never ends with a
bare ``[DONE]``, a cancelled one sends ``abort`` before ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from helix_django.errors import RunInterruptedError
from helix_django.models import Run, RunStatus
from helix_django.streams.reader import ResumableReader
from helix_django.transport.frames import stream_frames
from helix_django.transport.plan import ResponsePlan, plan_frames
from helix_django.transport.replay import ResponseFilter
from tests.streams import conftest as stream_managers
from tests.transport.test_plan_frames import RUN, chunk, parse

pytestmark = pytest.mark.django_db(transaction=True)
backend_name, manager = stream_managers.backend_name, stream_managers.manager  # fixtures: every stream manager


async def stream_of(manager, ending):
    """``manager`` with a stream whose run streamed 'hi', then wrote ``ending`` (a list of ops)."""
    await manager.claim_stream("s1", RUN, epoch=1)
    await manager.append(
        "s1",
        RUN,
        [chunk("start", messageId="m1"), chunk("text-start", id="t"), chunk("text-delta", id="t", delta="hi")],
    )
    for op, arg in ending:
        if op == "append":
            await manager.append("s1", RUN, arg)
        elif op == "fail":
            await manager.fail_stream("s1", RUN, arg)
        elif op == "end":
            await manager.end_stream("s1", RUN, end_status=arg)
        elif op == "pause":
            await manager.pause_stream("s1", RUN)
    return manager


async def frames_of(manager, *, live):
    """The parsed frames of a response following the run from the start (live: a reader; else a backlog)."""
    info = await manager.get_info("s1")
    run = Run(id=RUN, status=RunStatus.STREAMING)
    if live:
        reader = ResumableReader(manager, "s1", from_sequence=0, wait_for_live=False, info=info)
        plan = ResponsePlan(reader=reader, filter=ResponseFilter(run_id=RUN), run=run)
    else:
        chunks = await manager.read_all("s1", after=0)
        plan = ResponsePlan(backlog=chunks, filter=ResponseFilter(run_id=RUN), run=run)
    return parse([part async for part in plan_frames(plan)])


INTERRUPTED_BODY = RunInterruptedError(cause="process_lost", runId=RUN).to_body()
ENDINGS = {
    "completed": [("append", [chunk("finish"), chunk("helix-run-end", status="completed")]), ("end", "completed")],
    "interrupted": [("append", [chunk("helix-run-end", status="interrupted")]), ("fail", INTERRUPTED_BODY)],
    "failed": [
        ("append", [chunk("helix-run-end", status="failed")]),
        ("fail", {"error": "Provider error", "code": "provider_error", "retryable": True}),
    ],
    "cancelled": [("append", [chunk("helix-run-end", status="cancelled")]), ("end", "cancelled")],
    "suspended": [("append", [chunk("helix-run-end", status="suspended")]), ("pause", None)],
}


@pytest.mark.parametrize("live", [True, False], ids=["live-reader", "backlog"])
async def test_an_interrupted_run_ends_with_its_typed_error_never_done(manager, live):
    frames = await frames_of(await stream_of(manager, ENDINGS["interrupted"]), live=live)
    assert "[DONE]" not in frames
    last = frames[-1]
    assert last["type"] == "error"

    assert json.loads(last["errorText"]) == INTERRUPTED_BODY


@pytest.mark.parametrize("live", [True, False], ids=["live-reader", "backlog"])
async def test_a_failed_run_ends_with_its_typed_error(manager, live):

    frames = await frames_of(await stream_of(manager, ENDINGS["failed"]), live=live)
    assert "[DONE]" not in frames
    assert json.loads(frames[-1]["errorText"])["code"] == "provider_error"


@pytest.mark.parametrize("live", [True, False], ids=["live-reader", "backlog"])
async def test_a_cancelled_run_sends_abort_then_done(manager, live):
    frames = await frames_of(await stream_of(manager, ENDINGS["cancelled"]), live=live)
    assert frames[-2:] == [{"type": "abort"}, "[DONE]"]
    assert not any(isinstance(f, dict) and f["type"] in ("error", "finish") for f in frames)


@pytest.mark.parametrize("status", ["completed", "suspended"])
async def test_a_finished_or_suspended_run_ends_with_done(manager, status):
    frames = await frames_of(await stream_of(manager, ENDINGS[status]), live=True)
    assert frames[-1] == "[DONE]"
    assert not any(isinstance(f, dict) and f["type"] in ("error", "abort") for f in frames)


async def test_an_interrupted_run_end_without_a_stored_error_still_ends_typed(manager):
    """The run's end was written but its stream failing was not (a fenced or lost write): never ``[DONE]``."""

    await stream_of(manager, [("append", [chunk("helix-run-end", status="interrupted")]), ("end", "completed")])
    frames = await frames_of(manager, live=False)
    assert "[DONE]" not in frames
    body = json.loads(frames[-1]["errorText"])
    assert body["code"] == "run_interrupted" and body["retryable"] is True and body["runId"] == RUN


async def test_a_stream_ended_cancelled_without_the_runs_end_chunk_sends_abort(manager):
    await stream_of(manager, [("end", "cancelled")])
    frames = await frames_of(manager, live=True)
    assert frames[-2:] == [{"type": "abort"}, "[DONE]"]


async def test_a_stream_paused_by_a_recovery_fence_is_a_drop_never_done(manager):
    """Recovery pauses the stream to fence the run's writer (recovery/scan.py): a live reader must re-attach, not finish."""
    await stream_of(manager, [])
    info = await manager.get_info("s1")
    run = Run(id=RUN, status=RunStatus.STREAMING)
    reader = ResumableReader(manager, "s1", from_sequence=0, wait_for_live=False, info=info)
    plan = ResponsePlan(reader=reader, filter=ResponseFilter(run_id=RUN), run=run)

    async def fence_soon():
        await asyncio.sleep(0.05)
        await manager.pause_stream("s1", RUN)

    fencing = asyncio.ensure_future(fence_soon())
    frames = parse([part async for part in plan_frames(plan)])
    await fencing
    assert "[DONE]" not in frames
    body = json.loads(frames[-1]["errorText"])
    assert body["code"] == "transport_stream_drop" and body["retryable"] is True


@pytest.mark.parametrize("live", [True, False], ids=["live-reader", "backlog"])
async def test_nothing_of_a_run_is_sent_after_its_end(manager, live):
    """A fenced writer's retried append can land after the recovery's run end (seen with a full disk): never shown."""
    late = [chunk("text-delta", id="t", delta=" late"), chunk("text-end", id="t")]
    await stream_of(
        manager, [("append", [chunk("helix-run-end", status="interrupted"), *late]), ("fail", INTERRUPTED_BODY)]
    )
    frames = await frames_of(manager, live=live)
    assert "late" not in json.dumps(frames)
    assert frames[-1]["type"] == "error"
    info = await manager.get_info("s1")
    reader = ResumableReader(manager, "s1", from_sequence=0, wait_for_live=False, info=info)
    raw = [frame async for frame in stream_frames(reader)]
    assert "late" not in json.dumps(raw) and raw[-1]["type"] == "fail"
