"""StreamWriter(coalesce_deltas=True): pending deltas of one part become one stored chunk.

Run against every backend: the merged chunk gets one sequence, readers see every
character exactly once, and anything that is not a continuation of the same part is
never merged.
"""

from __future__ import annotations

import pytest

from helix_django.streams.writer import StreamWriter, can_merge

pytestmark = pytest.mark.django_db(transaction=True)


def text(n: int, part: str = "t", **extra) -> dict:
    return {"type": "text-delta", "id": part, "delta": f"c{n} ", "_run": "run_a", **extra}


async def test_pending_deltas_of_one_part_are_stored_as_one_chunk(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1000, coalesce_deltas=True)
    writer.write({"type": "text-start", "id": "t", "_run": "run_a"})
    for i in range(5):
        writer.write(text(i))
    writer.write(text(5, part="other"))
    writer.write({"type": "text-end", "id": "t", "_run": "run_a"})
    assert await writer.flush() == 4
    stored = await manager.read_all("s1")
    assert [chunk["type"] for _seq, chunk in stored] == ["text-start", "text-delta", "text-delta", "text-end"]
    merged = {k: v for k, v in stored[1][1].items() if k != "_at"}  # _at: the flush's store time
    assert (stored[1][0], merged) == (2, {"type": "text-delta", "id": "t", "delta": "c0 c1 c2 c3 c4 ", "_run": "run_a"})
    assert stored[2][1]["delta"] == "c5 "


async def test_chunks_already_flushed_are_never_merged_into(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1000, coalesce_deltas=True)
    writer.write(text(1))
    await writer.flush()
    writer.write(text(2))
    await writer.flush()
    assert [chunk["delta"] for _seq, chunk in await manager.read_all("s1")] == ["c1 ", "c2 "]


async def test_without_the_option_every_delta_is_its_own_chunk(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1000)
    for i in range(3):
        writer.write(text(i))
    assert await writer.flush() == 3


def test_only_continuations_of_the_same_part_merge():
    assert can_merge(text(1), text(2))
    assert not can_merge(text(1), text(2, part="u"))
    assert not can_merge(text(1), {**text(2), "_attempt": "a2"})
    assert not can_merge(text(1, _step=1), text(2, _step=2))
    assert not can_merge(text(1), {**text(2), "type": "reasoning-delta"})
    assert not can_merge({"type": "text-start", "id": "t"}, {"type": "text-start", "id": "t"})
    assert not can_merge(text(1), {**text(2), "delta": "x" * 9000})
    assert can_merge(
        {"type": "reasoning-delta", "id": "r", "delta": "a"}, {"type": "reasoning-delta", "id": "r", "delta": "b"}
    )
