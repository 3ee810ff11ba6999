"""Adversarial tests of plan_frames' body parts (several whole frames per part) on real stream managers."""

from __future__ import annotations

import asyncio
import json

import pytest

from helix_django.errors import StreamConnectionError
from helix_django.models import Run, RunStatus
from helix_django.streams.reader import ResumableReader
from helix_django.transport.plan import BODY_BYTES, ResponsePlan, plan_frames
from helix_django.transport.replay import ResponseFilter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
RUN = "run_1"


def chunk(kind, **fields):
    return {"type": kind, "_run": RUN, **fields}


def delta(n: int, size: int = 8) -> dict:
    return chunk("text-delta", id="t", delta=f"{n}:".ljust(size, "x") + "|")


def frames_of(parts: list[bytes]) -> list[tuple[int | None, object]]:
    """``(id, data)`` of every frame of the parts; each part must hold whole frames only."""
    out = []
    for part in parts:
        assert part.endswith(b"\n\n"), part[-40:]
        for raw in part[:-2].split(b"\n\n"):
            lines = raw.decode().split("\n")
            ident = next((int(line[4:]) for line in lines if line.startswith("id: ")), None)
            data = next(line[6:] for line in lines if line.startswith("data: "))
            out.append((ident, data if data == "[DONE]" else json.loads(data)))
    return out


async def open_stream(manager, chunks):
    await manager.claim_stream("s1", RUN, epoch=1)
    if chunks:
        await manager.append("s1", RUN, chunks)


def live_plan(manager, info, *, prefix=None, backlog=None, after=0):
    reader = ResumableReader(manager, "s1", from_sequence=after, wait_for_live=False, info=info)
    return ResponsePlan(
        prefix=list(prefix or []),
        backlog=list(backlog or []),
        reader=reader,
        filter=ResponseFilter(run_id=RUN),
        run=Run(id=RUN, status=RunStatus.STREAMING),
    )


async def test_frames_written_in_bursts_while_reading_arrive_once_in_order_and_end_with_done(manager):
    await open_stream(manager, [chunk("start", messageId="m1"), chunk("text-start", id="t")])
    plan = live_plan(manager, await manager.get_info("s1"))
    total = 600

    async def write():
        n = 0
        for burst in (1, 7, 50, 3, 200, 1, 1, 120, 217):
            await manager.append("s1", RUN, [delta(n + i) for i in range(burst)])
            n += burst
            await asyncio.sleep(0.005)
        assert n == total
        await manager.append("s1", RUN, [chunk("text-end", id="t"), chunk("finish"), chunk("helix-run-end")])
        await manager.end_stream("s1", RUN)

    writer = asyncio.ensure_future(write())
    parts = [part async for part in plan_frames(plan)]
    await writer
    frames = frames_of(parts)
    ids = [ident for ident, _ in frames if ident is not None]
    assert ids == sorted(set(ids)) and ids[0] == 1  # strictly increasing: each stored chunk once
    deltas = [data["delta"] for _, data in frames if isinstance(data, dict) and data.get("type") == "text-delta"]
    assert deltas == [delta(n)["delta"] for n in range(total)]
    assert frames[-1] == (None, "[DONE]") and [d for _, d in frames].count("[DONE]") == 1
    assert len(parts) < len(frames)  # bursts left together


async def test_a_chunk_larger_than_the_body_bound_is_one_whole_part_between_others(manager):
    big = chunk("text-delta", id="t", delta="y" * (BODY_BYTES + 1000))
    stored = [chunk("start", messageId="m1"), chunk("text-start", id="t"), delta(1), big, delta(2)]
    await open_stream(manager, stored + [chunk("text-end", id="t"), chunk("finish"), chunk("helix-run-end")])
    await manager.end_stream("s1", RUN)
    backlog = await manager.read_all("s1")
    plan = ResponsePlan(backlog=backlog, filter=ResponseFilter(run_id=RUN), run=Run(id=RUN, status=RunStatus.COMPLETED))
    parts = [part async for part in plan_frames(plan)]
    frames = frames_of(parts)
    assert [ident for ident, _ in frames] == [1, 2, 3, 4, 5, 6, 7, None]
    assert frames[3][1]["delta"] == big["delta"]
    assert all(len(part) < 2 * BODY_BYTES + 2000 for part in parts)


async def test_a_failed_read_after_prefix_and_backlog_sends_them_all_then_one_error_and_nothing_else(manager):
    await open_stream(manager, [chunk("start", messageId="m1"), chunk("text-start", id="t"), delta(1), delta(2)])
    info = await manager.get_info("s1")
    backlog = await manager.read_all("s1", after=2)
    prefix = [{"type": "start", "messageId": "m1"}, {"type": "text-start", "id": "t"}]
    plan = live_plan(manager, info, prefix=prefix, backlog=backlog, after=4)
    plan.filter.prescan(await manager.read_all("s1"))
    reads = 0
    original = manager.read_after

    async def failing(stream_id, after, limit=1000):
        nonlocal reads
        reads += 1
        if reads == 1:
            await manager.append("s1", RUN, [delta(3), delta(4)])
            return await original(stream_id, after)
        raise StreamConnectionError(cause="read")  # the store went away with frames ready

    manager.read_after = failing
    try:
        parts = [part async for part in plan_frames(plan)]
    finally:
        del manager.read_after
    frames = frames_of(parts)
    assert [ident for ident, _ in frames] == [None, None, 3, 4, 5, 6, None]
    assert [d["delta"] for _, d in frames[2:6]] == [delta(n)["delta"] for n in (1, 2, 3, 4)]
    last = frames[-1][1]
    assert last["type"] == "error"
    body = json.loads(last["errorText"])
    assert body["code"] == "transport_stream_connection" and body["retryable"] is True


async def test_nothing_after_a_terminal_even_with_chunks_buffered_behind_it(manager):
    await open_stream(manager, [chunk("start", messageId="m1"), chunk("text-start", id="t"), delta(1)])
    plan = live_plan(manager, await manager.get_info("s1"))
    # One read returns the terminal with more chunks behind it (a later writer's leftovers).
    await manager.append("s1", RUN, [chunk("finish"), chunk("helix-run-end"), delta(9), chunk("finish")])
    parts = [part async for part in plan_frames(plan)]
    frames = frames_of(parts)
    assert [d if d == "[DONE]" else d["type"] for _, d in frames] == [
        "start", "text-start", "text-delta", "finish", "[DONE]",
    ]  # fmt: skip
    assert plan.reader._closed


async def test_a_consumer_closing_mid_part_closes_the_reader(manager):
    await open_stream(manager, [chunk("start", messageId="m1"), chunk("text-start", id="t")])
    await manager.append("s1", RUN, [delta(n, size=2000) for n in range(100)])  # > 64 KiB ready at once
    plan = live_plan(manager, await manager.get_info("s1"))
    frames = plan_frames(plan)
    first = await anext(frames)
    assert len(first) >= BODY_BYTES
    await frames.aclose()  # the client went away while the next part was pending
    assert plan.reader._closed and plan.reader.caught_up.is_set()
