"""The Redis manager's commit window: live streams' appends of a few milliseconds go as one pipeline.

While a loop's appends come at ``OPTIONS["COMMIT_WINDOW_RATE"]`` per second or faster, its
append scripts are sent a window apart (``OPTIONS["COMMIT_WINDOW_MS"]``), the appends made
meanwhile in one pipeline: one round trip and one task per window instead of per delta.
Each script still checks its own stream's fence, and a pipeline resent after a lost
reply stores nothing twice (each script carries its batch id). Slower, each append is
sent at once (``tests/streams/test_loop_rounds_per_lone_append.py``).
"""

from __future__ import annotations

import time

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from helix_django.errors import StreamFenceError
from tests.streams.conftest import redis_manager
from tests.streams.helpers import paced_writers

pytestmark = [pytest.mark.redis]

STREAMS = 20
DELTAS = 10
PERIOD_SECONDS = 0.02


def delta(n: int) -> dict:
    return {"type": "text-delta", "id": "t", "delta": f"d{n} "}


def recording_batches(manager) -> list[tuple[float, int]]:
    """Wrap the manager's queue so each pipeline records (monotonic seconds, appends carried)."""
    batches: list[tuple[float, int]] = []
    send = manager.appends._send

    async def recorded(batch):
        batches.append((time.monotonic(), len(batch)))
        return await send(batch)

    manager.appends._send = recorded
    return batches


async def stored_sequences(manager, stream_id: str) -> list[int]:
    chunks, _info = await manager.read_after(stream_id, 0)
    return [sequence for sequence, _chunk in chunks]


async def test_paced_appends_of_twenty_live_streams_go_a_window_apart_and_each_reader_gets_each_once():
    manager = redis_manager(COMMIT_WINDOW_MS=20, COMMIT_WINDOW_RATE=0, TAIL_CHUNKS=0)
    batches = recording_batches(manager)
    try:
        got = await paced_writers(manager, "pipe", streams=STREAMS, deltas=DELTAS, period=PERIOD_SECONDS, seed=11)
        assert all(sequences == list(range(1, DELTAS + 1)) for sequences in got.values()), got
        assert await stored_sequences(manager, "pipe_3") == list(range(1, DELTAS + 1))
    finally:
        await manager.aclose()
    assert sum(size for _at, size in batches) == STREAMS * DELTAS
    gaps = [round((b[0] - a[0]) * 1000, 1) for a, b in zip(batches, batches[1:], strict=False)]
    assert min(gaps) >= 12, gaps
    assert len(batches) <= STREAMS * DELTAS / 4, len(batches)


async def test_below_the_rate_each_append_is_sent_at_once():
    manager = redis_manager(COMMIT_WINDOW_MS=20, COMMIT_WINDOW_RATE=100_000)
    batches = recording_batches(manager)
    try:
        got = await paced_writers(manager, "pipe", streams=STREAMS, deltas=DELTAS, period=PERIOD_SECONDS, seed=11)
    finally:
        await manager.aclose()
    assert all(sequences == list(range(1, DELTAS + 1)) for sequences in got.values())
    assert batches == []  # each went as the manager's own append, in a task of its own


async def test_a_refused_script_fails_its_own_append_and_the_others_of_the_pipeline_are_stored():
    manager = redis_manager(COMMIT_WINDOW_MS=20, COMMIT_WINDOW_RATE=0)
    batches = recording_batches(manager)
    try:
        await manager.claim_stream("mine", "run_a", epoch=1)
        await manager.claim_stream("theirs", "run_b", epoch=1)
        first = manager.append_soon("mine", "run_a", [delta(0)])
        assert await first == [1]
        # Within the window: both go in the next pipeline, one of them fenced.
        mine = manager.append_soon("mine", "run_a", [delta(1)])
        theirs = manager.append_soon("theirs", "run_a", [delta(1)])
        assert await mine == [2]
        with pytest.raises(StreamFenceError) as refused:
            await theirs
        assert refused.value.cause == "stream_claimed_by_other_run"
        assert [size for _at, size in batches] == [1, 2]
        assert await stored_sequences(manager, "mine") == [1, 2]
        assert await stored_sequences(manager, "theirs") == []
    finally:
        await manager.aclose()


async def test_a_pipeline_whose_reply_was_lost_is_resent_and_stores_each_chunk_once():
    manager = redis_manager(COMMIT_WINDOW_MS=20, COMMIT_WINDOW_RATE=0)
    try:
        for stream_id in ("a", "b"):
            await manager.claim_stream(stream_id, "run_a", epoch=1)
        state = manager._state()
        real_pipeline = state.client.pipeline
        lost = []

        def pipeline(*args, **kwargs):
            pipe = real_pipeline(*args, **kwargs)
            execute = pipe.execute

            async def execute_then_lose_the_reply(*a, **k):
                replies = await execute(*a, **k)
                if not lost:  # the scripts ran on the server; the reply never arrives
                    lost.append(replies)
                    raise RedisConnectionError("connection lost reading the reply")
                return replies

            pipe.execute = execute_then_lose_the_reply
            return pipe

        state.client.pipeline = pipeline
        try:
            futures = [manager.append_soon(stream_id, "run_a", [delta(0), delta(1)]) for stream_id in ("a", "b")]
            assert [await future for future in futures] == [[1, 2], [1, 2]]
        finally:
            del state.client.pipeline
        assert len(lost) == 1
        assert await stored_sequences(manager, "a") == [1, 2]
        assert await stored_sequences(manager, "b") == [1, 2]
        assert (await manager.get_info("a")).head_sequence == 2
    finally:
        await manager.aclose()
