"""Adversarial tests of StreamWriter.batched() (every backend): raises, appends in flight, max_chunks."""

from __future__ import annotations

import pytest

from helix_django.streams.writer import StreamWriter
from tests.streams.helpers import chunk, stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


async def test_chunks_written_in_a_block_that_raises_are_still_stored_without_a_flush(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=20, max_chunks=50)
    with pytest.raises(RuntimeError), writer.batched():
        writer.write(chunk(1))
        writer.write(chunk(2))
        raise RuntimeError("the caller failed half-way")
    assert writer._batching is False
    # write() promises the next batch: the chunks are stored within the interval, no flush needed.
    assert [s for s, _ in await stored(manager, "s1", 2)] == [1, 2]
    writer.write(chunk(3))
    assert await writer.flush() == 3
    assert [c["delta"] for _, c in await manager.read_all("s1")] == ["c1 ", "c2 ", "c3 "]  # once each


async def test_a_block_ending_while_an_append_is_in_flight_chains_after_it_in_order(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=60_000, max_chunks=50)
    writer.write(chunk(1))  # leading edge: in flight
    assert writer._inflight is not None
    with writer.batched():
        writer.write(chunk(2))
        writer.write(chunk(3))
    assert await writer.flush() == 3
    assert [(s, c["delta"]) for s, c in await manager.read_all("s1")] == [(1, "c1 "), (2, "c2 "), (3, "c3 ")]


async def test_a_block_larger_than_max_chunks_is_stored_whole_and_once(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=60_000, max_chunks=2)
    with writer.batched():
        for n in range(1, 6):
            writer.write(chunk(n))
        assert writer._inflight is None  # held until the block ends
    assert await writer.flush() == 5
    assert [c["delta"] for _, c in await manager.read_all("s1")] == [f"c{n} " for n in range(1, 6)]
