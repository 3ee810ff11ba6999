"""plan_frames on the in-memory stream manager: terminals, drops and read failures are never a clean finish."""

from __future__ import annotations

import asyncio
import json

from helix_django.errors import StreamConnectionError
from helix_django.models import Run, RunStatus
from helix_django.streams.memory import MemoryStreamManager
from helix_django.streams.reader import ResumableReader
from helix_django.transport.plan import ResponsePlan, plan_frames
from helix_django.transport.replay import ResponseFilter

RUN = "run_1"


def chunk(kind, **fields):
    return {"type": kind, "_run": RUN, **fields}


async def setup_stream(*, end=False):
    manager = MemoryStreamManager("test", {})
    await manager.claim_stream("s1", RUN, epoch=1)
    await manager.append(
        "s1",
        RUN,
        [chunk("start", messageId="m1"), chunk("text-start", id="t"), chunk("text-delta", id="t", delta="hi")],
    )
    if end:
        await manager.append("s1", RUN, [chunk("finish"), chunk("helix-run-end", status="completed")])
        await manager.end_stream("s1", RUN)
    return manager


def plan_for(manager, info):
    reader = ResumableReader(manager, "s1", from_sequence=0, wait_for_live=False, info=info)
    return ResponsePlan(reader=reader, filter=ResponseFilter(run_id=RUN), run=Run(id=RUN, status=RunStatus.STREAMING))


def split(parts):
    """The SSE frames of body parts (a part holds one or more whole frames)."""
    frames = []
    for part in parts:
        assert part.endswith(b"\n\n")  # a part never ends inside a frame
        frames.extend(raw + b"\n\n" for raw in part[:-2].split(b"\n\n"))
    return frames


def parse(parts):
    out = []
    for raw in split(parts):
        text = raw.decode()
        data = next(line[6:] for line in text.splitlines() if line.startswith("data: "))
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_a_real_terminal_ends_with_done():
    manager = await setup_stream(end=True)
    frames = split([f async for f in plan_frames(plan_for(manager, await manager.get_info("s1")))])
    assert frames[0].startswith(b"id: 1\n")
    assert [c if c == "[DONE]" else c["type"] for c in parse(frames)] == [
        "start", "text-start", "text-delta", "finish", "[DONE]",
    ]  # fmt: skip


async def test_a_reader_closed_while_the_stream_is_active_ends_with_a_drop_error():
    manager = await setup_stream()
    plan = plan_for(manager, await manager.get_info("s1"))
    frames = []

    async def consume():
        async for part in plan_frames(plan):
            frames.extend(split([part]))
            if len(frames) == 3:
                await plan.reader.close()

    await asyncio.wait_for(consume(), 5)
    last = parse(frames)[-1]
    assert last["type"] == "error" and frames[-1].startswith(b"event: error\n")
    body = json.loads(last["errorText"])
    assert body["code"] == "transport_stream_drop" and body["retryable"] is True
    assert "[DONE]" not in parse(frames)


async def test_a_failed_read_ends_with_one_typed_retryable_error(monkeypatch):
    manager = await setup_stream()
    plan = plan_for(manager, await manager.get_info("s1"))
    original = manager.read_after
    calls = []

    async def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise StreamConnectionError(cause="read")
        return await original(*args, **kwargs)

    monkeypatch.setattr(manager, "read_after", flaky)
    plan.reader.fail_safe_seconds = 0.1  # nothing is written: the second read comes from the fail-safe wake-up
    out = parse([f async for f in plan_frames(plan)])
    assert [c["type"] for c in out[:3]] == ["start", "text-start", "text-delta"]
    assert len(out) == 4 and json.loads(out[3]["errorText"])["code"] == "transport_stream_connection"


async def test_frames_ready_together_leave_as_one_part_before_the_reader_waits():
    manager = await setup_stream()  # three chunks stored, the stream still active
    frames = plan_frames(plan_for(manager, await manager.get_info("s1")))
    first = await asyncio.wait_for(anext(frames), 5)  # not held back while the reader waits for more
    assert [c["type"] for c in parse([first])] == ["start", "text-start", "text-delta"]
    waiting = asyncio.ensure_future(anext(frames))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await manager.append("s1", RUN, [chunk("text-delta", id="t", delta=" there"), chunk("text-end", id="t")])
    second = await asyncio.wait_for(waiting, 5)
    assert [c.get("delta") for c in parse([second])] == [" there", None]
    await frames.aclose()


async def test_a_long_backlog_leaves_in_parts_of_bounded_size():
    from helix_django.transport.plan import BODY_BYTES

    manager = MemoryStreamManager("test", {})
    await manager.claim_stream("s1", RUN, epoch=1)
    deltas = [chunk("text-delta", id="t", delta="x" * 100) for _ in range(3000)]
    await manager.append("s1", RUN, [chunk("start", messageId="m1"), chunk("text-start", id="t"), *deltas])
    await manager.append("s1", RUN, [chunk("finish"), chunk("helix-run-end", status="completed")])
    await manager.end_stream("s1", RUN)
    backlog = await manager.read_all("s1")
    plan = ResponsePlan(backlog=backlog, filter=ResponseFilter(run_id=RUN), run=Run(id=RUN, status=RunStatus.COMPLETED))
    parts = [part async for part in plan_frames(plan)]
    out = parse(parts)
    assert len(out) == 3000 + 4 and out[-1] == "[DONE]"  # every frame once, in order
    assert [c["delta"] for c in out[2:-2]] == ["x" * 100] * 3000
    total = sum(len(part) for part in parts)
    assert len(parts) <= total // BODY_BYTES + 1  # a few sends, not one per chunk
    assert all(len(part) < BODY_BYTES + 1024 for part in parts)
