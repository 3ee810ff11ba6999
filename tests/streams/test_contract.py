"""The stream-manager contract (DESIGN, "Stream manager contract"), run against every backend."""

from __future__ import annotations

import asyncio

import pytest

from helix_django.errors import StreamFenceError
from helix_django.streams.writer import StreamWriter
from tests.streams.helpers import append_and_follow, chunk, collect, parked, record_batches, record_reads

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


async def test_sequences_strictly_increase_under_concurrent_appenders(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)

    async def appender(k: int) -> list[int]:
        seqs = []
        for i in range(10):
            seqs += await manager.append("s1", "run_a", [chunk(k * 100 + i), chunk(k * 100 + i + 50)])
        return seqs

    results = await asyncio.gather(*(appender(k) for k in range(8)))
    everything = sorted(s for seqs in results for s in seqs)
    assert everything == list(range(1, 161))
    for seqs in results:
        assert seqs == sorted(seqs)
    info = await manager.get_info("s1")
    assert info.head_sequence == 160
    await manager.end_stream("s1", "run_a")
    reader = await manager.create_resumable_reader("s1")
    got = await asyncio.wait_for(collect(reader), TIMEOUT)
    assert [s for s, _ in got] == list(range(1, 161))


async def test_reader_from_cursor_yields_exactly_later_chunks_once(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(i) for i in range(1, 51)])
    await manager.end_stream("s1", "run_a")
    for cursor in (0, 1, 20, 49, 50):
        reader = await manager.create_resumable_reader("s1", from_sequence=cursor)
        got = await asyncio.wait_for(collect(reader), TIMEOUT)
        assert [s for s, _ in got] == list(range(cursor + 1, 51))
        assert [c["delta"] for _, c in got] == [f"c{i} " for i in range(cursor + 1, 51)]
        assert reader.current_sequence == 50


async def test_a_second_task_iterating_a_busy_reader_is_refused_and_the_first_gets_every_chunk(manager):
    # Two tasks on one cursor would split or repeat chunks: the second is refused at once.
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    assert (await anext(reader))[0] == 1
    first = asyncio.ensure_future(anext(reader))
    for _ in range(10):  # let the first task start and park
        await asyncio.sleep(0)
    await parked(manager, "s1")
    with pytest.raises(RuntimeError, match="one reader per task"):
        await anext(reader)
    await manager.append("s1", "run_a", [chunk(2), chunk(3)])
    assert (await asyncio.wait_for(first, TIMEOUT))[0] == 2
    await manager.end_stream("s1", "run_a")
    assert [s for s, _ in await asyncio.wait_for(collect(reader), TIMEOUT)] == [3]


async def test_backlog_boundary_and_live_tail(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(i) for i in range(1, 11)])
    reader = await manager.create_resumable_reader("s1", from_sequence=0)
    backlog = await asyncio.wait_for(collect(reader, limit=10), TIMEOUT)
    assert [s for s, _ in backlog] == list(range(1, 11))
    assert reader.catch_up_head == 10
    assert reader.caught_up.is_set()
    nxt = asyncio.ensure_future(reader.__anext__())
    await parked(manager, "s1")
    assert not nxt.done()
    await manager.append("s1", "run_a", [chunk(11)])
    seq, item = await asyncio.wait_for(nxt, TIMEOUT)
    assert (seq, item["delta"]) == (11, "c11 ")
    await manager.end_stream("s1", "run_a")
    assert await asyncio.wait_for(collect(reader), TIMEOUT) == []


async def test_read_backlog_returns_every_chunk_to_the_reported_head_with_that_info(manager):
    assert await manager.read_backlog("s1") == ([], None)
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(n) for n in range(1, 1203)])  # more than one read batch
    chunks, info = await manager.read_backlog("s1", after=150)
    assert [s for s, _ in chunks] == list(range(151, 1203))
    assert chunks[-1][1]["delta"] == "c1202 "
    assert (info.head_sequence, info.run_id, info.status) == (1202, "run_a", "active")
    assert await manager.read_backlog("s1", after=1202) == ([], info)


async def test_wait_for_live_parks_before_the_stream_exists_and_wakes_on_first_write(manager):
    assert await manager.create_resumable_reader("new") is None
    reader = await manager.create_resumable_reader("new", wait_for_live=True)
    assert reader is not None
    task = asyncio.ensure_future(collect(reader))
    await parked(manager, "new")
    assert not task.done()
    await manager.claim_stream("new", "run_a", epoch=1)
    await manager.append("new", "run_a", [chunk(1), chunk(2)])
    await manager.end_stream("new", "run_a")
    got = await asyncio.wait_for(task, TIMEOUT)
    assert [s for s, _ in got] == [1, 2]


async def test_run_start_window_ignores_previous_turns_terminal(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1), chunk(2)])
    await manager.end_stream("s1", "run_a")
    plain = await manager.create_resumable_reader("s1", from_sequence=2)
    assert await asyncio.wait_for(collect(plain), TIMEOUT) == []
    reader = await manager.create_resumable_reader("s1", from_sequence=2, wait_for_live=True)
    task = asyncio.ensure_future(collect(reader))
    await parked(manager, "s1")
    assert not task.done()
    await manager.claim_stream("s1", "run_b", epoch=2)
    await manager.append("s1", "run_b", [chunk(3, "run_b")])
    await manager.end_stream("s1", "run_b")
    got = await asyncio.wait_for(task, TIMEOUT)
    assert [(s, c["_run"]) for s, c in got] == [(3, "run_b")]


async def test_failed_stream_ends_reader_with_one_error_chunk(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    reader = await manager.create_resumable_reader("s1")
    first = await asyncio.wait_for(reader.__anext__(), TIMEOUT)
    assert first[0] == 1
    body = {"error": "The model provider failed", "code": "provider_error", "retryable": False}
    info = await manager.fail_stream("s1", "run_a", body)
    assert info.status == "failed"
    rest = await asyncio.wait_for(collect(reader), TIMEOUT)
    assert len(rest) == 1
    assert rest[0][1]["type"] == "error"
    assert rest[0][1]["helixError"] == body
    assert await manager.create_resumable_reader("s1") is None
    assert (await manager.get_info("s1")).error == body


async def test_stale_run_is_fenced_once_a_newer_run_claimed(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    await manager.claim_stream("s1", "run_b", epoch=2)
    with pytest.raises(StreamFenceError):
        await manager.append("s1", "run_a", [chunk(2)])
    with pytest.raises(StreamFenceError):
        await manager.end_stream("s1", "run_a")
    with pytest.raises(StreamFenceError):
        await manager.fail_stream("s1", "run_a", {"error": "x", "code": "y"})
    with pytest.raises(StreamFenceError):
        await manager.pause_stream("s1", "run_a")
    with pytest.raises(StreamFenceError):
        await manager.claim_stream("s1", "run_a", epoch=1)
    info = await manager.get_info("s1")
    assert (info.status, info.run_id, info.head_sequence) == ("active", "run_b", 1)


async def test_get_info_is_none_only_for_a_missing_stream(manager):
    assert await manager.get_info("missing") is None
    await manager.claim_stream("s1", "run_a", epoch=1)
    info = await manager.get_info("s1")
    assert (info.status, info.head_sequence, info.run_id) == ("active", 0, "run_a")


async def test_pause_ends_readers_and_the_same_run_reactivates(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1)])
    await manager.pause_stream("s1", "run_a")
    reader = await manager.create_resumable_reader("s1")
    assert [s for s, _ in await asyncio.wait_for(collect(reader), TIMEOUT)] == [1]
    with pytest.raises(StreamFenceError):
        await manager.append("s1", "run_a", [chunk(2)])
    info = await manager.claim_stream("s1", "run_a", epoch=1)
    assert info.status == "active"
    assert await manager.append("s1", "run_a", [chunk(2)]) == [2]


async def test_ended_stream_keeps_its_end_status(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    info = await manager.end_stream("s1", "run_a", end_status="cancelled")
    assert (info.status, info.end_status) == ("ended", "cancelled")


async def test_purge_drops_every_chunk_keeps_the_head_and_a_new_claim_goes_on_after_it(manager):
    await manager.purge_stream("missing")  # a no-op
    assert await manager.get_info("missing") is None
    await manager.claim_stream("s1", "run_a", epoch=1)
    await manager.append("s1", "run_a", [chunk(1), chunk(2), chunk(3)])
    await manager.fail_stream("s1", "run_a", {"error": "boom", "code": "provider_error"})
    await manager.purge_stream("s1")
    info = await manager.get_info("s1")
    assert (info.status, info.head_sequence, info.run_id, info.error) == ("ended", 4, "", None)
    assert await manager.read_all("s1") == []
    assert await manager.create_resumable_reader("s1") is not None  # ended, not failed: an empty read
    # A session that takes the id later: its run claims with a newer epoch and continues after the old head.
    await manager.claim_stream("s1", "run_b", epoch=2)
    assert await manager.append("s1", "run_b", [chunk(9, run="run_b")]) == [5]
    assert [(s, c["_run"]) for s, c in await manager.read_all("s1")] == [(5, "run_b")]


async def test_writer_coalesces_chunks_into_batches(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    batches = record_batches(manager)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1000, max_chunks=50)
    for i in range(120):
        writer.write(chunk(i))
    last = await writer.flush()
    assert last == 120
    assert sum(map(len, batches)) == 120
    assert len(batches) <= 3


async def test_writer_chains_chunks_written_during_an_append_onto_it_without_a_timer(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    batches = record_batches(manager)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=60_000, max_chunks=50)
    writer.write(chunk(1))  # leading edge: appended at once
    for n in range(2, 6):
        writer.write(chunk(n))  # while that append is in flight
    reader = await manager.create_resumable_reader("s1")
    got = await asyncio.wait_for(collect(reader, limit=5), TIMEOUT)  # long before the 60 s window
    assert [s for s, _ in got] == [1, 2, 3, 4, 5]
    assert [len(batch) for batch in batches] == [1, 4]
    # A reader may see the chained batch before the writer's append call returns to it (on
    # Redis the reader's XRANGE reply can arrive before the writer's EVALSHA reply):
    # last_sequence is what the writer knows is stored, so it is checked once flush() waited.
    assert await writer.flush() == 5


async def test_claim_and_append_stores_a_runs_first_chunks_right_after_the_claimed_head(manager):
    info, sequences = await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(1), chunk(2)])
    assert (info.run_id, info.head_sequence, sequences) == ("run_a", 0, [1, 2])
    assert await manager.append("s1", "run_a", [chunk(3)]) == [3]
    reader = await manager.create_resumable_reader("s1", from_sequence=3)
    info, sequences = await manager.claim_and_append("s1", "run_b", epoch=2, chunks=[chunk(4, run="run_b")])
    assert (info.run_id, info.head_sequence, sequences) == ("run_b", 3, [4])
    assert await asyncio.wait_for(collect(reader, limit=1), TIMEOUT) == [(4, chunk(4, run="run_b"))]
    with pytest.raises(StreamFenceError):  # a stale claim stores nothing
        await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(9)])
    with pytest.raises(StreamFenceError):
        await manager.append("s1", "run_a", [chunk(9)])
    info, sequences = await manager.claim_and_append("s1", "run_b", epoch=2, chunks=[])  # the holder, nothing to add
    assert (info.head_sequence, sequences) == (4, [])
    assert [s for s, _ in await manager.read_all("s1")] == [1, 2, 3, 4]


@pytest.mark.parametrize("closed", ["ended", "failed", "paused"])
async def test_an_opening_claim_never_reactivates_a_stream_closed_for_its_run(manager, closed):
    """Another process ended the run at its epoch before the run's own claim landed: the claim is refused."""
    await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(1)])
    await manager.end_stream("s1", "run_a")
    await manager.claim_stream("s1", "run_b", epoch=2)  # the closer claims for run_b at its epoch, then closes
    await manager.append("s1", "run_b", [chunk(2, run="run_b")])
    if closed == "ended":
        await manager.end_stream("s1", "run_b", end_status="cancelled")
    elif closed == "failed":
        await manager.fail_stream("s1", "run_b", {"error": "x", "code": "run_interrupted"})
    else:
        await manager.pause_stream("s1", "run_b")
    before = await manager.get_info("s1")
    with pytest.raises(StreamFenceError) as refused:
        await manager.claim_and_append("s1", "run_b", epoch=2, chunks=[chunk(9, run="run_b")])
    assert refused.value.cause == "run_ended"
    assert await manager.get_info("s1") == before  # nothing stored, nothing re-activated
    with pytest.raises(StreamFenceError) as stale:  # an earlier run's claim is stale, as ever
        await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(9)])
    assert stale.value.cause == "stale_claim"
    # A claim that is not the run's opening (recovery closing the run's stream) still re-activates it.
    assert (await manager.claim_stream("s1", "run_b", epoch=2)).status == "active"


async def test_an_opening_claim_repeated_on_its_active_stream_succeeds(manager):
    """A resend of an opening claim whose reply was lost finds the stream active and held by it."""
    await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[chunk(1)])
    info, sequences = await manager.claim_and_append("s1", "run_a", epoch=1, chunks=[])
    assert (info.status, info.run_id, info.head_sequence, sequences) == ("active", "run_a", 1, [])


async def test_a_caught_up_reader_reads_once_per_wake_up(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    reads = record_reads(manager)
    reader = await manager.create_resumable_reader("s1")
    got = []

    async def follow():
        async for sequence, _chunk in reader:
            got.append(sequence)

    task = asyncio.ensure_future(follow())
    await parked(manager, "s1")
    for n in range(1, 11):
        await append_and_follow(manager, got, n)
    assert got == list(range(1, 11))
    # One read per wake-up (plus the opening read): a reader that read up to the head keeps
    # its subscription and parks without reading again when nothing was written since.
    assert len(reads) <= 12, reads
    await manager.end_stream("s1", "run_a")
    await asyncio.wait_for(task, TIMEOUT)
    assert manager.notifier.waiter_count("s1") == 0


async def test_writer_surfaces_a_fence_error(manager):
    await manager.claim_stream("s1", "run_a", epoch=1)
    writer = StreamWriter(manager, "s1", "run_a", flush_interval_ms=1, max_chunks=50)
    await manager.claim_stream("s1", "run_b", epoch=2)
    writer.write(chunk(1))
    with pytest.raises(StreamFenceError):
        await writer.flush()
