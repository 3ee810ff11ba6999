"""Opening resumes through the server: server CPU per opened SSE response, and idle memory per open one (issue 23).

A daphne subprocess (``HELIX_BENCH_SERVER``: the server of every HTTP section) serves
``bench.asgi`` with the clock provider at a slow pace, so one chat run stays live and
quiet (a delta every ``QUIET_SECONDS``). Per repeat, ``open_responses`` clients open a
resume of that run at once (``GET <prefix>sessions/<id>/chat``, as the AI SDK's
``resumeStream`` does: DRF token auth, the replayed run so far, then live) and read to
their first chunk frame: the server's CPU seconds (/proc utime+stime) over those opens,
per response. Then, all of them open and idle, the server's resident memory growth per
response. Baseline in the same repeat: as many clients opening the bare ASGI SSE route
of the same server (its first frame at once, the next after ``QUIET_SECONDS``).
Targets: CPU per open <= 3x the bare route's; idle memory per connection <= 1.5x.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from bench.config import Sizes
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.sections.e2e import missing, server_name, start_server, token_headers
from bench.sections.sse import _proc_cpu_seconds, _proc_rss_bytes, clock_agent_settings

NAME = "opens"
QUIET_SECONDS = 60.0
TARGET_CPU_RATIO = 3.0
TARGET_MEMORY_RATIO = 1.5


async def _first_frame(client, url: str, headers, opened: list[float], hold: asyncio.Event) -> None:
    """Open ``url``, read to the first chunk frame (``id:`` line), then hold the response open until ``hold``."""
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, response.status_code
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                opened.append(time.perf_counter())
                break
        await hold.wait()


async def _open_many(client, server, count: int, url: str, headers) -> tuple[float, float]:
    """Open ``count`` responses of ``url`` at once; return (server CPU ms per open, idle RSS KiB per open)."""
    pid = server.process.pid
    opened: list[float] = []
    hold = asyncio.Event()
    rss_before, cpu_before = _proc_rss_bytes(pid), _proc_cpu_seconds(pid)
    tasks = [asyncio.ensure_future(_first_frame(client, url, headers, opened, hold)) for _ in range(count)]
    try:
        while len(opened) < count:
            failed = [task for task in tasks if task.done() and task.exception()]
            if failed:
                raise failed[0].exception()
            await asyncio.sleep(0.02)
        cpu = _proc_cpu_seconds(pid) - cpu_before
        await asyncio.sleep(1.0)  # idle: nothing is written to any of them
        rss = _proc_rss_bytes(pid) - rss_before
    finally:
        hold.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return cpu / count * 1000, max(0, rss) / 1024 / count


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
    cpu: dict[str, list[float]] = {"helix": [], "bare": []}
    memory: dict[str, list[float]] = {"helix": [], "bare": []}
    bare_url = server.url(f"/bench/sse?tokens=2&pace={1 / QUIET_SECONDS}")
    try:
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            session_id, live = await _live_run(client, server, headers)
            resume_url = server.url(f"/helix/api/sessions/{session_id}/chat")
            try:
                await _open_many(client, server, min(count, 20), bare_url, {})  # warm-up of both
                await _open_many(client, server, min(count, 20), resume_url, headers)
                for _ in range(sizes.repeats):
                    for label, url, extra in (("bare", bare_url, {}), ("helix", resume_url, headers)):
                        per_cpu, per_memory = await _open_many(client, server, count, url, extra)
                        cpu[label].append(per_cpu)
                        memory[label].append(per_memory)
            finally:
                live.cancel()
    except (httpx.HTTPError, AssertionError, TimeoutError) as exc:
        return [not_available(NAME, "resume opens through the server", f"failed: {exc!r}"[:300])]
    finally:
        await sync_to_async(server.stop)()
    return _rows(count, cpu, memory)


def _row(name: str, samples: dict[str, list[float]], unit: str, baseline_name: str, limit: float, note: str) -> Row:
    """One row: helix's samples next to the bare route's, with the paired ratio and the ratio target ``limit``.

    No ratio (and no verdict) when no repeat has a baseline above 0 (tiny sizes: no measurable growth).
    """
    ratio = paired_ratio(samples["helix"], samples["bare"]) if any(samples["bare"]) else None
    return Row(
        NAME,
        name,
        value=Stat.of(samples["helix"], unit),
        baseline_name=baseline_name,
        baseline=Stat.of(samples["bare"], unit),
        ratio=ratio,
        target=f"<= {limit:g}x bare",
        holds=None if ratio is None else ratio.median <= limit,
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
            TARGET_CPU_RATIO,
            "GET <prefix>sessions/<id>/chat of a live run: token auth, the run replayed so far, then live",
        ),
        _row(
            f"database/sqlite via {via}: idle memory per open SSE response ({count} open)",
            memory,
            "KiB",
            "bare ASGI SSE",
            TARGET_MEMORY_RATIO,
            "server RSS growth with every response open and idle, per response",
        ),
    ]
