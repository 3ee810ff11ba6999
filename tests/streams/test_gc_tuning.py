"""helix_django.tuning: the collector's thresholds for a process streaming many generations.

Counts collections (not time) while 300 live streams on the database manager are written
and read, as the bench's live section does, once under CPython's thresholds and once
after tune_gc_for_streaming().
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable

import pytest

from helix_django.streams import load_stream_manager
from helix_django.streams.writer import StreamWriter
from helix_django.tuning import STREAMING_GC_THRESHOLD0, tune_gc_for_streaming

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 300
TOKENS = 100
CPYTHON_THRESHOLDS = (700, 10, 10)


def test_tuning_sets_the_streaming_thresholds_and_returns_the_previous_ones():
    before = gc.get_threshold()
    try:
        gc.set_threshold(*CPYTHON_THRESHOLDS)
        assert tune_gc_for_streaming() == CPYTHON_THRESHOLDS
        assert gc.get_threshold() == (STREAMING_GC_THRESHOLD0, 10, 10)
        assert gc.isenabled()
        gc.set_threshold(50_000, 7, 9)  # a higher first threshold and the others are kept
        assert tune_gc_for_streaming() == (50_000, 7, 9)
        assert gc.get_threshold() == (50_000, 7, 9)
    finally:
        gc.set_threshold(*before)


async def _collections_while_streaming(label: str, configure: Callable[[], object]) -> Counter:
    """Return collections per generation while STREAMS writers and readers exchange TOKENS deltas each.

    ``configure()`` sets the collector's thresholds for the exchange (restored after).
    """
    manager = load_stream_manager(
        "gc", {"gc": {"BACKEND": "helix_django.streams.database.DatabaseStreamManager", "OPTIONS": {}}}
    )
    writers, readers, received = [], [], Counter()

    async def follow(stream_id: str) -> None:
        reader = await manager.create_resumable_reader(stream_id, wait_for_live=True)
        async for _sequence, chunk in reader:
            received[stream_id] += len(chunk["delta"].split())

    for n in range(STREAMS):
        stream_id = f"gc_{label}_{n}"
        await manager.claim_stream(stream_id, "run_gc", epoch=1)
        writers.append(StreamWriter(manager, stream_id, "run_gc", flush_interval_ms=15, coalesce_deltas=True))
        readers.append(asyncio.ensure_future(follow(stream_id)))
    await asyncio.sleep(0.05)

    counts: Counter = Counter()

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            counts[info["generation"]] += 1

    gc.collect()
    previous = gc.get_threshold()
    configure()
    gc.callbacks.append(count)
    try:
        for token in range(TOKENS):
            for writer in writers:
                writer.write({"type": "text-delta", "id": "t", "delta": f"{token} "})
            await asyncio.sleep(0.005)
        for writer in writers:
            await writer.flush()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*previous)
    for writer in writers:
        await manager.end_stream(writer.stream_id, writer.run_id)
    await asyncio.wait_for(asyncio.gather(*readers), timeout=60)
    await manager.aclose()
    assert set(received.values()) == {TOKENS}  # every reader got every token: the load was real
    return counts


async def test_live_streams_cause_far_fewer_collections_under_the_streaming_thresholds():
    cpython = await _collections_while_streaming("cpython", lambda: gc.set_threshold(*CPYTHON_THRESHOLDS))
    streaming = await _collections_while_streaming("streaming", tune_gc_for_streaming)
    # CPython's thresholds collect young objects over and over and promote the streams'
    # in-flight objects into the older generations; the streaming ones leave them to die young.
    assert cpython[0] >= 10, cpython
    assert streaming[0] * 5 <= cpython[0], (cpython, streaming)
    assert streaming[1] + streaming[2] < cpython[1] + cpython[2], (cpython, streaming)


def test_the_example_site_asgi_module_applies_the_streaming_thresholds():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "example_project.settings"}
    code = "import gc, example_project.asgi; print(gc.get_threshold())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == str((STREAMING_GC_THRESHOLD0, *gc.get_threshold()[1:]))
