"""Helpers of the stream-manager tests: chunks to write, and readers to drain or wait on."""

from __future__ import annotations

import asyncio


def chunk(n: int, run: str = "run_a") -> dict:
    """Return the ``n``-th text-delta chunk of ``run`` (delta ``"c<n> "``)."""
    return {"type": "text-delta", "id": "t", "delta": f"c{n} ", "_run": run}


def record_batches(manager) -> list[list[dict]]:
    """Record every batch ``manager`` is asked to store through ``append_soon`` (the writer's way in).

    Returns the live list of batches (each a list of chunks); ``del manager.append_soon`` stops recording.
    """
    batches: list[list[dict]] = []
    original = manager.append_soon

    def recording(stream_id, run_id, chunks):
        batches.append(list(chunks))
        return original(stream_id, run_id, chunks)

    manager.append_soon = recording
    return batches


async def collect(reader, limit: int | None = None) -> list[tuple[int, dict]]:
    """Drain ``reader`` to its end (or to ``limit`` items): ``[(sequence, chunk), ...]``."""
    out = []
    async for item in reader:
        out.append(item)
        if limit is not None and len(out) >= limit:
            break
    return out


async def parked(manager, stream_id: str) -> None:
    """Wait (by yielding to the loop, not sleeping) until a reader parks on the notifier.

    Raises AssertionError if none parks within 10 000 turns of the loop.
    """
    for _ in range(10_000):
        if manager.notifier.waiter_count(stream_id):
            return
        await asyncio.sleep(0)
    raise AssertionError("reader never parked")


async def stored(manager, stream_id: str, count: int, seconds: float = 2.0) -> list:
    """Return the stored chunks once ``count`` are there (polled every 10 ms); AssertionError after ``seconds``."""
    chunks: list = []
    for _ in range(int(seconds / 0.01)):
        chunks = await manager.read_all(stream_id)
        if len(chunks) >= count:
            return chunks
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(chunks)} of {count} chunks stored")


def record_reads(manager) -> list[int]:
    """Record the cursor (``after``) of every ``read_after`` call of ``manager``; returns the live list."""
    reads: list[int] = []
    original = manager.read_after

    async def recording(stream_id, after, **kwargs):
        reads.append(after)
        return await original(stream_id, after, **kwargs)

    manager.read_after = recording
    return reads


async def append_and_follow(manager, got: list[int], n: int, *, run: str = "run_a", stream_id: str = "s1") -> None:
    """Append ``chunk(n)`` and wait (yielding to the loop) until a follower put ``n`` in ``got`` and parked again."""
    await manager.append(stream_id, run, [chunk(n, run=run)])
    for _ in range(10_000):
        if len(got) == n:
            break
        await asyncio.sleep(0)
    await parked(manager, stream_id)
