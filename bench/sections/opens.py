"""Opening resumes through the server: server CPU per opened SSE response, and idle memory per open one.

A daphne subprocess (``HELIX_BENCH_SERVER``: the server of every HTTP section) serves
``bench.asgi`` with the clock provider at a slow pace, so one chat run stays live and
quiet (a delta every ``QUIET_SECONDS``). Per repeat, ``open_responses`` clients open a
resume of that run at once (``GET <prefix>sessions/<id>/chat``, as the AI SDK's
``resumeStream`` does: DRF token auth, the replayed run so far, then live) and read to
their first chunk frame: the server's CPU seconds (/proc utime+stime) over those opens,
per response. Then, in a second pass of as many opens with tracemalloc on in the server
(``/bench/heap`` of :mod:`bench.asgi`, started just before the opens, read after a full
collection with all of them open and idle), the bytes they keep, per response: what a
held response retains, not the resident set (which rises and falls with heap reuse: it
swung 3-38 KiB between repeats). Baseline in the same repeat, measured the same two
ways: as many clients opening the bare ASGI SSE route of the same server (its first
frame at once, the next after ``QUIET_SECONDS``). A second baseline: the site's own
authenticated SSE endpoint (``/bench/authenticated/sse``, :mod:`bench.views`: Django's
handler, the site's middleware and the same token authentication), measured the same two
ways: what any authenticated endpoint of the site takes.
Targets (paired median ratios): CPU per open <= 1x the site's view; idle memory per open
response <= 0.6x the site's view and <= 1.5x the bare route. CPU per open next to the bare
route is informational.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from bench.config import Sizes
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.sections.e2e import missing, server_name, start_server, token_headers
from bench.sections.sse import _proc_cpu_seconds, clock_agent_settings

NAME = "opens"
QUIET_SECONDS = 60.0
TARGET_HOST_CPU_RATIO = 1.0
"""CPU per open <= 1x the site's own authenticated DRF SSE view's."""
TARGET_HOST_MEMORY_RATIO = 0.6
"""Idle memory per open response <= 0.6x the site's view's."""
TARGET_MEMORY_RATIO = 1.5
"""Idle memory per open response <= 1.5x the bare route's."""


async def _first_frame(client, url: str, headers, opened: list[float], hold: asyncio.Event) -> None:
    """Open ``url``, read to the first chunk frame (``id:`` line), then hold the response open until ``hold``.

    The line iterator is kept while holding: an httpx iterator left after ``break`` is
    finalized at once, and closing it closes the connection (the server saw every
    response disconnect as soon as it opened, so the idle rows measured no open response).
    """
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, response.status_code
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("id:"):
                opened.append(time.perf_counter())
                break
        await hold.wait()
        del lines


async def _open_all(client, count: int, url: str, headers, hold: asyncio.Event) -> list[asyncio.Task]:
    """Open ``count`` responses of ``url`` at once; return once each read its first frame (open until ``hold``)."""
    opened: list[float] = []
    tasks = [asyncio.ensure_future(_first_frame(client, url, headers, opened, hold)) for _ in range(count)]
    while len(opened) < count:
        failed = [task for task in tasks if task.done() and task.exception()]
        if failed:
            hold.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise failed[0].exception()
        await asyncio.sleep(0.02)
    return tasks


async def _cpu_per_open(client, server, count: int, url: str, headers) -> float:
    """Open ``count`` responses of ``url`` at once; return the server's CPU ms per open (tracing off)."""
    pid = server.process.pid
    hold = asyncio.Event()
    cpu_before = _proc_cpu_seconds(pid)
    tasks = await _open_all(client, count, url, headers, hold)
    cpu = _proc_cpu_seconds(pid) - cpu_before
    hold.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return cpu / count * 1000


async def _heap(client, server, op: str) -> tuple[int, dict[str, int]]:
    """Drive tracemalloc in the server (``/bench/heap``); return (traced bytes, open requests by kind)."""
    response = await client.get(server.url(f"/bench/heap?op={op}"))
    assert response.status_code == 200, response.status_code
    answer = response.json()
    return answer["tracedBytes"], answer["open"]


async def _kept_per_open(client, server, count: int, label: str, url: str, headers) -> float:
    """Open ``count`` responses of ``url`` under tracemalloc; return the KiB still allocated per idle open one.

    Raises AssertionError unless the server still serves all of them at the read (a
    response the server already ended would keep nothing).
    """
    hold = asyncio.Event()
    before, _open = await _heap(client, server, "start")
    tasks = []
    try:
        tasks = await _open_all(client, count, url, headers, hold)
        await asyncio.sleep(1.0)  # idle: nothing is written to any of them
        traced, serving = await _heap(client, server, "read")
        assert serving[label] >= count, f"the server serves {serving[label]} of {count} {label} responses"
    finally:
        hold.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _heap(client, server, "stop")
    return max(0, traced - before) / 1024 / count


async def _live_run(client, server, headers) -> tuple[str, asyncio.Task]:
    """Start one quiet chat run; return its session id and the task reading its response (cancel it at the end)."""
    session_id = f"bench_open_{uuid.uuid4().hex[:12]}"
    message = {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": "tokens=1000"}]}
    body = {"id": session_id, "messages": [message], "trigger": "submit-message"}
    started = asyncio.Event()

    async def follow() -> None:
        url = server.url(f"/helix/api/sessions/{session_id}/chat")
        async with client.stream("POST", url, json=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if "text-delta" in line:
                    started.set()

    task = asyncio.ensure_future(follow())
    await asyncio.wait_for(started.wait(), 30)
    return session_id, task


async def run(sizes: Sizes) -> list[Row]:
    """Return the CPU-per-open and idle-memory rows, each next to the bare SSE route."""
    reason = missing()
    if reason:
        return [not_available(NAME, "resume opens through the server", reason)]
    import httpx
    from asgiref.sync import sync_to_async

    count = sizes.open_responses
    headers = await sync_to_async(token_headers)()
    server = await sync_to_async(start_server)(clock_agent_settings(1000, 1 / QUIET_SECONDS))
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    cpu: dict[str, list[float]] = {"helix": [], "bare": [], "host": []}
    memory: dict[str, list[float]] = {"helix": [], "bare": [], "host": []}
    bare_url = server.url(f"/bench/sse?tokens=2&pace={1 / QUIET_SECONDS}&spread=0")
    host_url = server.url(f"/bench/authenticated/sse?tokens=2&pace={1 / QUIET_SECONDS}&spread=0")
    try:
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            session_id, live = await _live_run(client, server, headers)
            resume_url = server.url(f"/helix/api/sessions/{session_id}/chat")
            routes = (("bare", bare_url, {}), ("host", host_url, headers), ("helix", resume_url, headers))
            try:
                for label, url, extra in routes:  # warm-up
                    await _cpu_per_open(client, server, min(count, 20), url, extra)
                    await _kept_per_open(client, server, min(count, 20), label, url, extra)
                for _ in range(sizes.repeats):
                    for label, url, extra in routes:
                        cpu[label].append(await _cpu_per_open(client, server, count, url, extra))
                        memory[label].append(await _kept_per_open(client, server, count, label, url, extra))
            finally:
                live.cancel()
    except (httpx.HTTPError, AssertionError, TimeoutError) as exc:
        return [not_available(NAME, "resume opens through the server", f"failed: {exc!r}"[:300])]
    finally:
        await sync_to_async(server.stop)()
    return _rows(count, cpu, memory)


def _row(
    name: str,
    samples: dict[str, list[float]],
    unit: str,
    baseline_name: str,
    limit: float | None,
    note: str,
    baseline: str = "bare",
) -> Row:
    """One row: helix's samples next to the ``baseline`` route's, with the paired ratio and the ratio target ``limit``.

    No ratio (and no verdict) when no repeat has a baseline above 0 (tiny sizes: no measurable
    growth); no target when ``limit`` is None (informational). The target reads
    ``<= {limit}x bare`` or ``<= {limit}x view`` (``baseline`` "host").
    """
    ratio = paired_ratio(samples["helix"], samples[baseline]) if any(samples[baseline]) else None
    against = "view" if baseline == "host" else "bare"
    return Row(
        NAME,
        name,
        value=Stat.of(samples["helix"], unit),
        baseline_name=baseline_name,
        baseline=Stat.of(samples[baseline], unit),
        ratio=ratio,
        target="" if limit is None else f"<= {limit:g}x {against}",
        holds=None if ratio is None or limit is None else ratio.median <= limit,
        note=note,
    )


def _rows(count: int, cpu: dict[str, list[float]], memory: dict[str, list[float]]) -> list[Row]:
    via = server_name()
    return [
        _row(
            f"database/sqlite via {via}: server CPU to open one resume ({count} at once)",
            cpu,
            "ms",
            "bare ASGI SSE open",
            None,
            "GET <prefix>sessions/<id>/chat of a live run: token auth, the run replayed so far, then live",
        ),
        _row(
            f"database/sqlite via {via}: idle memory per open SSE response ({count} open)",
            memory,
            "KiB",
            "bare ASGI SSE",
            TARGET_MEMORY_RATIO,
            "bytes the opens allocated and keep with every response idle (tracemalloc in the server), per response",
        ),
        _row(
            f"database/sqlite via {via}: server CPU to open one resume, next to the site's own endpoint",
            cpu,
            "ms",
            "site's authenticated DRF SSE view",
            TARGET_HOST_CPU_RATIO,
            "the same opens next to the site's own SSE view: its middleware and token auth, no helix (bench/views.py)",
            baseline="host",
        ),
        _row(
            f"database/sqlite via {via}: idle memory per open SSE response, next to the site's own endpoint",
            memory,
            "KiB",
            "site's authenticated DRF SSE view",
            TARGET_HOST_MEMORY_RATIO,
            "the same held responses next to the site's own SSE view held open",
            baseline="host",
        ),
    ]
