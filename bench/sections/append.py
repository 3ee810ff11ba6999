"""Section 1: append throughput per stream manager, next to the raw driver (issues 2, 7, 8).

Each repeat writes ``append_chunks`` ~60-byte deltas to a fresh stream through the
manager (``append`` in batches of ``batch_chunks``: one stream-writer flush each), and the
same rows through the raw driver in the same batches. Reported in chunks/s; the ratio is
manager/raw per repeat.
"""

from __future__ import annotations

import asyncio

from bench import raw
from bench.config import Sizes, stream_backends
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.payloads import Timer, batches, deltas, encoded, unique
from helix_django.streams import load_stream_manager

NAME = "append"
TARGETS = {"database/sqlite": 0.30, "redis": 0.50}


async def _manager_append(manager, chunks: list[dict], batch: int) -> float:
    stream_id, run_id = unique("bench_append"), unique("run")
    await manager.claim_stream(stream_id, run_id, epoch=1)
    with Timer() as timer:
        for part in batches(chunks, batch):
            await manager.append(stream_id, run_id, part)
    return timer.seconds


def _memory_raw(chunks: list[dict], batch: int) -> float:
    """The in-process limit: list appends of the same chunks under a lock."""
    import threading

    lock, store, seqs = threading.Lock(), [], []
    with Timer() as timer:
        for part in batches(chunks, batch):
            with lock:
                head = len(store)
                seqs.extend(range(head + 1, head + 1 + len(part)))
                store.extend(part)
    return timer.seconds


def _baseline(label: str, chunks: list[dict], batch: int) -> tuple[str, float]:
    if label == "memory":
        return "python list", _memory_raw(chunks, batch)
    if label == "redis":
        return "redis-py XADD pipeline", raw.redis_append(unique("bench_raw"), [encoded(c) for c in chunks], batch)
    rows = raw.chunk_rows(unique("bench_raw"), unique("run"), chunks)
    if label == "database/postgres":
        return "psycopg executemany", raw.postgres_append(rows, batch)
    return "sqlite3 executemany", raw.sqlite_append(rows, batch)


async def run(sizes: Sizes) -> list[Row]:
    """Measure every available backend; return one row per backend."""
    chunks = deltas(sizes.append_chunks)
    n = len(chunks)
    rows: list[Row] = []
    for label, entry in stream_backends().items():
        name = f"{label}: {n:,} chunks, batches of {sizes.batch_chunks}"
        if isinstance(entry, str):
            rows.append(not_available(NAME, name, entry))
            continue
        manager = load_stream_manager(label, {label: entry})
        values, bases, base_name = [], [], ""
        for _ in range(sizes.repeats):
            base_name, base_seconds = await asyncio.to_thread(_baseline, label, chunks, sizes.batch_chunks)
            seconds = await _manager_append(manager, chunks, sizes.batch_chunks)
            values.append(n / seconds)
            bases.append(n / base_seconds)
        await manager.aclose()
        ratio = paired_ratio(values, bases)
        target = TARGETS.get(label)
        rows.append(
            Row(
                NAME,
                name,
                value=Stat.of(values, "chunks/s"),
                baseline_name=base_name,
                baseline=Stat.of(bases, "chunks/s"),
                ratio=ratio,
                target=f">= {target:.0%} of raw" if target else "",
                holds=(ratio.median >= target) if target else None,
            )
        )
    return rows
