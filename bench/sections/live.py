"""Section 4: many live generations on one process (issue 8).

``runs`` generations each emit ``live_tokens_per_second`` text deltas for ``live_seconds``
through a :class:`StreamWriter` (the runtime's coalescing writer) into the stream
manager; each is followed by one resumable reader (``wait_for_live``), as the SSE route
does. Separately, one generation is followed by ``live_fanout_readers`` readers. Token
arrival is driven by one ticker with 10 phases per token period, so emissions are spread
evenly like independent provider streams, without one timer task per generation.

Per configuration: p50/p99 of the delay from ``write()`` (the provider emitted the
delta) to the reader receiving it, CPU seconds per 1 000 delivered chunks (process time,
all threads), Python heap allocated per open generation+reader pair (tracemalloc while
opening them; RSS growth is hidden by memory freed in earlier repeats). The baseline is
the same schedule with an ``asyncio.Queue`` per reader instead of the stream manager (what the
event loop alone costs at that load). Target: p99 < 100 ms at 500 generations on the
database manager with SQLite.

This is the stream-manager layer (writer, manager, reader) in one process; the same
load through the runtime and daphne's SSE route is the ``sse`` section. Three variants
run: one chunk per delta, coalesced deltas (the runtime's default) under CPython's
collector thresholds, and coalesced deltas under the thresholds a streaming server sets
(:func:`helix_django.tuning.tune_gc_for_streaming`, as ``example_project/asgi.py`` does).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable

from bench.config import DATABASE_BACKEND, Sizes
from bench.harness import Row, delay_rows
from bench.payloads import unique
from helix_django.conf import helix_settings
from helix_django.streams import load_stream_manager
from helix_django.streams.writer import StreamWriter
from helix_django.tuning import tune_gc_for_streaming

NAME = "live"
TARGET_P99_MS = 100.0
TARGET_RUNS = 500
PHASES = 10


class Result:
    """Delays (ms), delivered chunk count, CPU seconds and heap growth of one configuration."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.chunks = 0
        """Chunks the readers received (fewer than tokens when deltas were coalesced)."""
        self.cpu_seconds = 0.0
        self.heap_growth = 0
        """Python heap bytes allocated by opening the writers and parking the readers (tracemalloc)."""

    def percentile(self, q: float) -> float:
        """Return the ``q`` quantile (0..1) of the delays, in ms."""
        ordered = sorted(self.delays)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _ticker(emitters: list[Callable[[int], None]], tokens: int, rate: float) -> None:
    """Call every emitter ``tokens`` times at ``rate``/s, spread over PHASES phases per period."""
    loop = asyncio.get_running_loop()
    period = 1.0 / rate
    groups = [emitters[p::PHASES] for p in range(PHASES)]
    started = loop.time()
    for token in range(tokens):
        for phase, group in enumerate(groups):
            delay = started + (token + phase / PHASES) * period - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            for emit in group:
                emit(token)


async def _measure(setup: Callable, runs: int, readers_per_run: int, sizes: Sizes, tune_gc: bool = False) -> Result:
    """Run one configuration built by ``setup(runs, readers_per_run, result)``.

    With ``tune_gc``, the measurement runs after :func:`tune_gc_for_streaming` (thresholds restored after).
    """
    previous = tune_gc_for_streaming() if tune_gc else gc.get_threshold()
    try:
        result = Result()
        tokens = max(1, int(sizes.live_seconds * sizes.live_tokens_per_second))
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
        emitters, reader_tasks, finish = await setup(runs, readers_per_run, result)
        result.heap_growth = max(0, tracemalloc.get_traced_memory()[0] - heap_before)
        tracemalloc.stop()
        cpu_before = time.process_time()  # delivery only: opening the runs is not a per-chunk cost
        await _ticker(emitters, tokens, sizes.live_tokens_per_second)
        await finish()
        await asyncio.wait_for(asyncio.gather(*reader_tasks), timeout=60 + sizes.live_seconds * 10)
        result.cpu_seconds = time.process_time() - cpu_before
    finally:
        gc.set_threshold(*previous)
    expected = runs * readers_per_run * tokens
    assert len(result.delays) == expected, f"readers got {len(result.delays)} of {expected} tokens"
    return result


def _manager_setup(manager, *, coalesce: bool):
    async def setup(runs: int, readers_per_run: int, result: Result):
        flush_ms = helix_settings.FLUSH_INTERVAL_MS
        max_chunks = helix_settings.FLUSH_MAX_CHUNKS
        writers, tasks, clocks = [], [], []
        for _ in range(runs):
            stream_id, run_id = unique("bench_live"), unique("run")
            emitted: list[float] = []
            clocks.append(emitted)
            for _ in range(readers_per_run):
                tasks.append(asyncio.ensure_future(_read(manager, stream_id, emitted, result)))
            await manager.claim_stream(stream_id, run_id, epoch=1)
            writers.append(
                StreamWriter(
                    manager,
                    stream_id,
                    run_id,
                    flush_interval_ms=flush_ms,
                    max_chunks=max_chunks,
                    coalesce_deltas=coalesce,
                )
            )
        await asyncio.sleep(0.05)  # let readers open

        def emitter(writer: StreamWriter, emitted: list[float]) -> Callable[[int], None]:
            def emit(token: int) -> None:
                emitted.append(time.perf_counter())
                writer.write({"type": "text-delta", "id": "txt_1", "delta": f"{token} "})

            return emit

        async def finish() -> None:
            for writer in writers:
                await writer.flush()
            for writer in writers:
                await manager.end_stream(writer.stream_id, writer.run_id)

        return [emitter(w, c) for w, c in zip(writers, clocks, strict=True)], tasks, finish

    return setup


async def _read(manager, stream_id: str, emitted: list[float], result: Result) -> None:
    """Follow one stream; every token of every delta received counts one delay sample."""
    reader = await manager.create_resumable_reader(stream_id, wait_for_live=True)
    async for _sequence, chunk in reader:
        now = time.perf_counter()
        for token in chunk["delta"].split():
            result.delays.append((now - emitted[int(token)]) * 1000)
        result.chunks += 1


async def _queue_setup(runs: int, readers_per_run: int, result: Result):
    queues_per_run: list[list[asyncio.Queue]] = [[asyncio.Queue() for _ in range(readers_per_run)] for _ in range(runs)]

    async def consume(queue: asyncio.Queue) -> None:
        while (emitted_at := await queue.get()) is not None:
            result.delays.append((time.perf_counter() - emitted_at) * 1000)
            result.chunks += 1

    tasks = [asyncio.ensure_future(consume(q)) for queues in queues_per_run for q in queues]

    def emitter(queues: list[asyncio.Queue]) -> Callable[[int], None]:
        def emit(_token: int) -> None:
            emitted_at = time.perf_counter()
            for queue in queues:
                queue.put_nowait(emitted_at)

        return emit

    async def finish() -> None:
        for queues in queues_per_run:
            for queue in queues:
                queue.put_nowait(None)

    return [emitter(q) for q in queues_per_run], tasks, finish


def _rows(name: str, values: dict[str, list[float]], bases: dict[str, list[float]], is_target: bool) -> list[Row]:
    return delay_rows(
        NAME,
        name,
        values,
        bases,
        baseline_name="asyncio.Queue",
        target_p99_ms=TARGET_P99_MS if is_target else None,
        cpu="CPU per 1000 deltas",
        memory=("heap", "heap per open run+reader"),
        cpu_note=f"stored chunks per provider delta: {statistics.median(values['chunks_per_token']):.2f}",
    )


def _summary(result: Result, pairs: int) -> dict[str, float]:
    return {
        "p50": result.percentile(0.50),
        "p99": result.percentile(0.99),
        "cpu": result.cpu_seconds / max(1, len(result.delays)) * 1000,
        "chunks_per_token": result.chunks / max(1, len(result.delays)),
        "heap": result.heap_growth / 1024 / max(1, pairs),
    }


VARIANTS = (
    ("one chunk per delta", False, False),
    ("coalesced deltas (default)", True, False),
    ("coalesced deltas, streaming gc thresholds", True, True),
)


async def run(sizes: Sizes) -> list[Row]:
    """Return delay/CPU/memory rows per configuration and writer variant on the database manager (SQLite)."""
    manager = load_stream_manager("live", {"live": {"BACKEND": DATABASE_BACKEND, "OPTIONS": {"DATABASE": "default"}}})
    configs = [(runs, 1) for runs in sizes.live_runs] + [(1, sizes.live_fanout_readers)]
    repeats = max(1, min(sizes.repeats, 3))
    rows: list[Row] = []
    for runs, readers in configs:
        keys = ("p50", "p99", "cpu", "chunks_per_token", "heap")
        values = {variant: {k: [] for k in keys} for variant, _, _ in VARIANTS}
        bases: dict[str, list[float]] = {k: [] for k in keys}
        for _ in range(repeats):
            base = _summary(await _measure(_queue_setup, runs, readers, sizes), runs * readers)
            for key in keys:
                bases[key].append(base[key])
            for variant, coalesce, tune_gc in VARIANTS:
                setup = _manager_setup(manager, coalesce=coalesce)
                mine = _summary(await _measure(setup, runs, readers, sizes, tune_gc), runs * readers)
                for key in keys:
                    values[variant][key].append(mine[key])
        plural = "s" if readers > 1 else ""
        for variant, _, _ in VARIANTS:
            name = f"database/sqlite, {variant}: {runs} runs x {readers} reader{plural}"
            rows.extend(_rows(name, values[variant], bases, runs == TARGET_RUNS and readers == 1))
    await manager.aclose()
    return rows
