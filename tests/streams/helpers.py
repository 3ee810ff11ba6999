"""Helpers of the stream-manager tests: chunks to write, and readers to drain or wait on."""

from __future__ import annotations

import asyncio
import random

from helix_django.streams.reader import ResumableReader


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


async def parked_reader(manager, stream_id: str) -> asyncio.Future:
    """Open a live reader of ``stream_id`` that never falls back on its fail-safe re-read, drain it in a task.

    Returns the task (its result: :func:`collect`'s) once the reader parked.
    """
    reader = await manager.create_resumable_reader(stream_id, wait_for_live=True)
    reader.fail_safe_seconds = 3600
    task = asyncio.ensure_future(collect(reader))
    await parked(manager, stream_id)
    return task


async def listening(manager) -> None:
    """Wait until each loop listener of ``manager``'s channel-layer broadcaster is in its group (2 s at most)."""
    for _ in range(200):
        listeners = list(manager.notifier.remote._listeners.values())
        if listeners and all(listener.hearing for listener in listeners):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the layer listener never joined")


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


class RedisMonitor:
    """The commands redis-server runs on keys containing ``prefix``, as MONITOR reports them.

    Only commands clients sent (not those a script runs), each as its text
    (``"EVALSHA <sha> 3 <keys> ..."``). A thread reads the MONITOR connection;
    :meth:`settle` returns what was seen up to now; :meth:`close` stops it.
    """

    def __init__(self, url: str, prefix: str) -> None:
        import threading

        import redis

        self.url = url
        self.prefix = prefix
        self.commands: list[str] = []
        self._marks = 0
        self._client = redis.Redis.from_url(url, decode_responses=True)
        self._monitor = self._client.monitor()
        self._monitor.__enter__()  # sends MONITOR
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                command = self._monitor.next_command()
            except Exception:  # noqa: BLE001 - the connection was closed: stop
                return
            if command is None or command["client_type"] == "lua" or self.prefix not in command["command"]:
                continue
            if f"{self.prefix}:monitor-stop" in command["command"]:
                return
            self.commands.append(command["command"])

    def _send_marker(self, key: str) -> None:
        import redis

        with redis.Redis.from_url(self.url) as client:
            client.exists(key)

    async def settle(self, seconds: float = 5.0) -> list[str]:
        """Return the commands seen so far, once MONITOR reported a marker sent now (AssertionError after ``seconds``)."""
        self._marks += 1
        marker = f"{self.prefix}:monitor-mark-{self._marks}"
        await asyncio.to_thread(self._send_marker, marker)
        for _ in range(int(seconds / 0.01)):
            found = [i for i, text in enumerate(self.commands) if marker in text]
            if found:
                del self.commands[found[0]]
                return list(self.commands)
            await asyncio.sleep(0.01)
        raise AssertionError("MONITOR never reported the marker")

    def close(self) -> None:
        """Stop the reading thread and close the MONITOR connection."""
        self._send_marker(f"{self.prefix}:monitor-stop")
        self._thread.join(5)
        self._monitor.__exit__(None, None, None)
        self._client.close()


async def live_followers(
    manager, count: int, stream_id: str = "s1", seconds: float = 10
) -> tuple[list, list[list[int]], list]:
    """Start ``count`` readers following ``stream_id`` from its start; return ``(readers, got, tasks)`` once all are parked.

    ``got[i]``: the sequences reader ``i`` has read so far (a live list); ``tasks``: their
    follow tasks, which end with the stream. Each reader's fail-safe re-read is off (a
    missed wake-up fails the test's timeout). AssertionError or TimeoutError after ``seconds``.
    """
    readers = [await manager.create_resumable_reader(stream_id) for _ in range(count)]
    got: list[list[int]] = [[] for _ in range(count)]

    async def follow(reader, into):
        async for sequence, _chunk in reader:
            into.append(sequence)

    tasks = []
    for reader, into in zip(readers, got, strict=True):
        reader.fail_safe_seconds = 3600
        tasks.append(asyncio.ensure_future(follow(reader, into)))
    for reader in readers:
        await asyncio.wait_for(reader.caught_up.wait(), seconds)  # the opening reads are done
    await parked(manager, stream_id)
    return readers, got, tasks


async def paced_writers(
    manager, prefix: str, *, streams: int, deltas: int, period: float, seed: int = 7
) -> dict[str, list[int]]:
    """``streams`` writers, each appending ``deltas`` one-delta flushes on a clock (one per ``period``
    seconds, as a provider's deltas come: a commit's wait does not slow them), their offsets spread
    over the first period; each stream ended after its last flush. Returns each stream's
    sequences as a live reader of it got them, read to the stream's end.
    """
    rng = random.Random(seed)
    stream_ids = [f"{prefix}_{n}" for n in range(streams)]
    for stream_id in stream_ids:
        await manager.claim_stream(stream_id, "run_a", epoch=1)

    async def write(stream_id: str) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time() + rng.random() * period
        for n in range(deltas):
            await asyncio.sleep(max(0.0, start + n * period - loop.time()))
            await manager.append_soon(stream_id, "run_a", [chunk(n)])
        await manager.end_stream(stream_id, "run_a")

    async def read(stream_id: str) -> list[int]:
        info = await manager.get_info(stream_id)
        reader = ResumableReader(manager, stream_id, from_sequence=0, wait_for_live=True, info=info)
        return [sequence async for sequence, _chunk in reader]

    readers = [asyncio.ensure_future(read(stream_id)) for stream_id in stream_ids]
    await asyncio.wait_for(asyncio.gather(*(write(stream_id) for stream_id in stream_ids)), 30)
    got = await asyncio.wait_for(asyncio.gather(*readers), 30)
    return dict(zip(stream_ids, got, strict=True))
