"""Section 2: resume cost vs history (issues 2, 7, 8).

For each backend, two ended streams hold ``history_small`` and ``history_large`` chunks.
A reconnect opens a resumable reader from ``head - tail_chunks`` and reads to the head:
we time the first chunk (reconnect to first chunk) and the whole tail. Each repeat
times ``resume_reads`` reconnects per stream, interleaved, and keeps their median; the
ratio large/small is taken per repeat. The baseline is the same tail read as one raw
indexed SELECT (SQLite/PostgreSQL) or XRANGE (Redis) on the large stream.
"""

from __future__ import annotations

import json
import statistics
import time

from bench import raw
from bench.config import Sizes, stream_backends
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.payloads import batches, deltas, unique
from helix_django.streams import load_stream_manager

NAME = "resume"
TARGETS = {"redis": 1.5}
TARGET = 1.2


async def _fill(manager, count: int) -> tuple[str, int]:
    stream_id, run_id = unique("bench_resume"), unique("run")
    await manager.claim_stream(stream_id, run_id, epoch=1)
    head = 0
    for part in batches(deltas(count), 1_000):
        head = (await manager.append(stream_id, run_id, part))[-1]
    await manager.end_stream(stream_id, run_id)
    return stream_id, head


async def _reconnect(manager, stream_id: str, head: int, tail: int) -> tuple[float, float]:
    started = time.perf_counter()
    reader = await manager.create_resumable_reader(stream_id, from_sequence=head - tail)
    first = 0.0
    count = 0
    async for _sequence, _chunk in reader:
        count += 1
        if count == 1:
            first = time.perf_counter() - started
        if count == tail:
            break
    await reader.close()
    assert count == tail, (count, tail)
    return first * 1000, (time.perf_counter() - started) * 1000


TAIL_SQL = (
    "SELECT sequence, payload FROM helix_django_streamchunk WHERE stream_id = {p} AND sequence > {p} "
    "ORDER BY sequence LIMIT {p}"
)


def _raw_connection(label: str):
    """Return ``(connection, sql)`` for the raw tail read of ``label``, or None."""
    if label == "database/sqlite":
        return raw.sqlite_connect(), TAIL_SQL.format(p="?")
    if label == "database/postgres":
        import psycopg
        from django.conf import settings

        return psycopg.connect(settings.DATABASE_URL, autocommit=True), TAIL_SQL.format(p="%s")
    return None


def _raw_tail(conn_sql, stream_id: str, head: int, tail: int) -> float:
    """Time one raw tail read, JSON decoding included, on an open connection (ms)."""
    conn, sql = conn_sql
    started = time.perf_counter()
    rows = [
        (seq, json.loads(p) if isinstance(p, str) else p)
        for seq, p in conn.execute(sql, (stream_id, head - tail, tail))
    ]
    assert len(rows) == tail
    return (time.perf_counter() - started) * 1000


async def run(sizes: Sizes) -> list[Row]:
    """Return rows per backend: first chunk and tail read at both history sizes, and the ratios."""
    rows: list[Row] = []
    tail = sizes.tail_chunks
    for label, entry in stream_backends().items():
        if isinstance(entry, str):
            rows.append(not_available(NAME, f"{label}: resume", entry))
            continue
        manager = load_stream_manager(label, {label: entry})
        small = await _fill(manager, sizes.history_small)
        large = await _fill(manager, sizes.history_large)
        await _reconnect(manager, *small, tail)  # warm the connection and caches
        await _reconnect(manager, *large, tail)
        conn_sql = _raw_connection(label)
        per_repeat: dict[str, list[float]] = {k: [] for k in ("fs", "fl", "ts", "tl", "raw")}
        for _ in range(sizes.repeats):
            samples: dict[str, list[float]] = {k: [] for k in per_repeat}
            for _ in range(sizes.resume_reads):
                first, whole = await _reconnect(manager, *small, tail)
                samples["fs"].append(first)
                samples["ts"].append(whole)
                first, whole = await _reconnect(manager, *large, tail)
                samples["fl"].append(first)
                samples["tl"].append(whole)
                if conn_sql is not None:
                    samples["raw"].append(_raw_tail(conn_sql, *large, tail))
            for key, values in samples.items():
                if values:
                    per_repeat[key].append(statistics.median(values))
        await manager.aclose()
        if conn_sql is not None:
            conn_sql[0].close()
        target = TARGETS.get(label, TARGET)
        for what, small_key, large_key in (("first chunk", "fs", "fl"), (f"last {tail} chunks", "ts", "tl")):
            ratio = paired_ratio(per_repeat[large_key], per_repeat[small_key])
            rows.append(
                Row(
                    NAME,
                    f"{label}: {what} @ {sizes.history_large:,} history",
                    value=Stat.of(per_repeat[large_key], "ms"),
                    baseline_name=f"same @ {sizes.history_small:,}",
                    baseline=Stat.of(per_repeat[small_key], "ms"),
                    ratio=ratio,
                    target=f"ratio <= {target}",
                    holds=ratio.median <= target,
                )
            )
        if conn_sql is not None:
            rows.append(
                Row(
                    NAME,
                    f"{label}: last {tail} chunks vs raw SELECT @ {sizes.history_large:,}",
                    value=Stat.of(per_repeat["tl"], "ms"),
                    baseline_name="raw indexed SELECT",
                    baseline=Stat.of(per_repeat["raw"], "ms"),
                    ratio=paired_ratio(per_repeat["tl"], per_repeat["raw"]),
                    note="overhead of reader + manager over the bare query (informational)",
                )
            )
    return rows
