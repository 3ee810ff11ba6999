"""Section 4 over SSE: many live generations through the server, each followed by its SSE response.

A daphne (or ``HELIX_BENCH_SERVER``) subprocess serves ``bench.asgi`` with the default agent on
:class:`bench.provider.ClockProvider` (``live_tokens_per_second`` deltas per second, each
carrying its emission time on the machine-wide monotonic clock). For each N in
``live_runs``, N clients POST a chat message at once (DRF token auth, a new session
each) and read their SSE response to ``[DONE]``. A delay sample is taken for every
delta emitted after the last run started (steady state): receive time in the client
minus emission time in the provider. Also: daphne's CPU seconds per 1 000 deltas
(/proc utime+stime) and its resident memory growth per open response.
Baseline, same repeat: the same N clients reading ``/bench/sse`` (timestamped frames at
the same pace from a bare ASGI route on the same daphne: no run, no persistence).
Up to 100 runs the bare route is also measured storing each frame in one SQLite
transaction before sending it (``store=1``): the durable floor, what any server that commits
every delta before its readers see it does at least.
Target (ratio to the durable floor in the same repeat): server CPU per delta <= 1.5x at 10
and 100 runs. Rows print helix's figure, the floor, the ratio, the target and whether it
holds. The ratios to the bare route (delay, CPU, memory) are informational: that route runs
no Django, authenticates nobody and stores nothing. How many live runs one process carries
is the capacity section's figure (:mod:`bench.sections.capacity`).
Peer rows, no target, up to 100 runs, the first repeat only (past its capacity the peer lags
for minutes): helix's delay p50/p99 and CPU per delta next to django-eventstream with its
database storage (:mod:`bench.peers`), as helix / peer.
The HTTP client runs in this process and shares the 2 cores with the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

from bench.config import Sizes
from bench.harness import Row, Stat, count_deltas, delay_rows, not_available, paired_ratio
from bench.peers import eventstream_missing
from bench.sections.e2e import missing, server_name, start_server, token_headers

NAME = "sse"
TARGET_FLOOR_CPU_RATIO = 1.5
"""Server CPU per delta <= 1.5x the durable floor's (bare SSE + one SQLite commit per delta)."""
TARGET_FLOOR_RUNS = (10, 100)
"""The numbers of concurrent runs the per-delta CPU target applies to."""
FLOOR_NAME = "bare SSE + 1 SQLite commit/delta"
DURABLE_MAX_RUNS = 100
"""Configurations of at most this many runs are also measured against the bare route storing each
frame (``/bench/sse?store=1``); above it the bare route's lone commits would only measure SQLite's lock."""
START_ALLOWANCE_SECONDS_PER_RUN = 0.05
"""Each configuration's replies last ``live_seconds`` plus this per run, so all runs overlap."""


def _proc_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Sample:
    """Delays (ms, with emission times) and first-frame times of one configuration."""

    def __init__(self) -> None:
        self.delays: list[tuple[float, float]] = []
        self.first_frames: list[float] = []
        self.deltas = 0
        self.seen: set[int] = set()
        self.odd_frames = 0
        self.duplicates = 0
        """Deltas a response delivered twice, dropped (followed with ``unique``: the peer only)."""

    def steady(self) -> list[float]:
        """Delays of deltas emitted after every client got its first frame."""
        cutoff = max(self.first_frames) if self.first_frames else 0.0
        return sorted(delay for emitted, delay in self.delays if emitted >= cutoff)


async def _follow(client, method: str, url: str, sample: Sample, *, unique: bool = False, **kwargs) -> None:
    from httpx_sse import EventSource

    done = False
    seen: set[str] = set()
    async with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200, response.status_code
        async for event in EventSource(response).aiter_sse():
            now = time.perf_counter()
            if event.data == "[DONE]":
                done = True
                break
            if event.event == "error":
                raise AssertionError(f"error frame: {event.data[:200]}")
            try:
                chunk = json.loads(event.data)
            except ValueError:  # not a chunk frame (e.g. an empty event)
                sample.odd_frames += 1
                continue
            if chunk.get("type") != "text-delta":
                continue
            count_deltas(sample, chunk["delta"], now, seen if unique else None)
            if id(response) not in sample.seen:
                sample.seen.add(id(response))
                sample.first_frames.append(now)
    assert done, "a response ended without [DONE]"


async def _measure(
    client, server, runs: int, tokens: int, pace: float, headers, *, bare: bool, store: bool = False, peer: bool = False
) -> dict[str, float]:
    """Read ``runs`` responses at once: helix's chat POST, or (``bare``) the bare route (``store``: the durable
    floor) or (``peer``) django-eventstream's; return p50/p99 delay (ms), server CPU (s per 1 000 deltas),
    RSS growth (KiB per response) and the number of steady samples."""
    sample = Sample()
    pid = server.process.pid
    rss_before, cpu_before = _proc_rss_bytes(pid), _proc_cpu_seconds(pid)
    tasks = []
    for _ in range(runs):
        if peer:
            tasks.append(
                _follow(
                    client,
                    "GET",
                    server.url(f"/bench/peers/eventstream?tokens={tokens}&pace={pace}"),
                    sample,
                    unique=True,
                )
            )
        elif bare:
            url = server.url(f"/bench/sse?tokens={tokens}&pace={pace}" + ("&store=1" if store else ""))
            tasks.append(_follow(client, "GET", url, sample))
        else:
            session_id = f"bench_sse_{uuid.uuid4().hex[:12]}"
            text = f"tokens={tokens}"
            message = {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": text}]}
            body = {"id": session_id, "messages": [message], "trigger": "submit-message"}
            url = server.url(f"/helix/api/sessions/{session_id}/chat")
            tasks.append(_follow(client, "POST", url, sample, json=body, headers=headers))
    gathered = asyncio.gather(*tasks)
    peak = rss_before
    try:
        while not gathered.done():
            await asyncio.sleep(0.25)
            peak = max(peak, _proc_rss_bytes(pid))
        await gathered
    except BaseException:
        gathered.cancel()  # one failed response stops the configuration's other clients
        raise
    cpu = _proc_cpu_seconds(pid) - cpu_before
    assert sample.deltas == runs * tokens, (sample.deltas, runs * tokens)
    steady = sample.steady()
    assert steady, "no delta was emitted after the last run started"
    return {
        "p50": steady[len(steady) // 2],
        "p99": steady[min(len(steady) - 1, int(0.99 * len(steady)))],
        "cpu": cpu / sample.deltas * 1000,
        "rss": max(0, peak - rss_before) / 1024 / runs,
        "steady": len(steady),
        "duplicates": sample.duplicates,
    }


async def _config(client, server, runs: int, tokens: int, pace: float, headers, repeats: int, name: str) -> list[Row]:
    """Measure ``runs`` concurrent generations ``repeats`` times, each next to the bare SSE route."""
    import httpx

    mine: dict[str, list[float]] = {k: [] for k in ("p50", "p99", "cpu", "rss")}
    base: dict[str, list[float]] = {k: [] for k in mine}
    durable: list[float] = []
    peer: dict[str, list[float]] = {k: [] for k in ("p50", "p99", "cpu")}
    peer_error = "" if runs <= DURABLE_MAX_RUNS else f"measured up to {DURABLE_MAX_RUNS} runs"
    peer_error = peer_error or eventstream_missing()
    peer_duplicates = 0
    for _ in range(repeats):
        measured = await _measure(client, server, runs, tokens, pace, headers, bare=True)
        for key in base:
            base[key].append(measured[key])
        if runs <= DURABLE_MAX_RUNS:
            measured = await _measure(client, server, runs, tokens, pace, headers, bare=True, store=True)
            durable.append(measured["cpu"])
        if not peer_error and not peer["cpu"]:  # the peer: first repeat only (at 100 runs it lags for minutes)
            try:
                measured = await _measure(client, server, runs, tokens, pace, headers, bare=True, peer=True)
                for key in peer:
                    peer[key].append(measured[key])
                peer_duplicates = int(measured["duplicates"])
            except (AssertionError, ValueError, httpx.HTTPError) as exc:
                peer_error = f"failed: {exc!r}"[:200]
        measured = await _measure(client, server, runs, tokens, pace, headers, bare=False)
        for key in mine:
            mine[key].append(measured[key])
    rows = delay_rows(
        NAME,
        name,
        mine,
        base,
        baseline_name="bare ASGI SSE",
        target_p99_ms=None,
        cpu="server CPU per 1000 deltas",
        memory=("rss", "server RSS per open response"),
        cpu_note="informational: the bare route runs no Django, authenticates nobody, stores nothing",
    )
    if durable:
        rows.append(floor_row(name, runs, mine["cpu"], durable))
    rows += peer_rows(name, mine, peer, peer_error, peer_duplicates)
    return rows


def floor_row(name: str, runs: int, cpu: list[float], floor: list[float]) -> Row:
    """The per-delta CPU row against the durable floor: ``cpu``/``floor`` are per-repeat s per 1 000 deltas.

    Carries the target (<= ``TARGET_FLOOR_CPU_RATIO`` x the floor, paired median ratio) at
    ``TARGET_FLOOR_RUNS`` concurrent runs; informational at other counts.
    """
    ratio = paired_ratio(cpu, floor)
    target: dict = {}
    if runs in TARGET_FLOOR_RUNS:
        target = {"target": f"<= {TARGET_FLOOR_CPU_RATIO:g}x floor", "holds": ratio.median <= TARGET_FLOOR_CPU_RATIO}
    return Row(
        NAME,
        f"{name}: server CPU per 1000 deltas vs the durable floor",
        value=Stat.of(cpu, "s"),
        baseline_name=FLOOR_NAME,
        baseline=Stat.of(floor, "s"),
        ratio=ratio,
        note="the floor: a bare route that commits each delta to SQLite before sending it (same file, same tables)",
        **target,
    )


async def run(sizes: Sizes) -> list[Row]:
    """Return p50/p99 delay, server CPU and memory rows per number of concurrent runs."""
    reason = missing()
    if reason:
        return [not_available(NAME, "live generations over SSE", reason)]
    import httpx
    from asgiref.sync import sync_to_async

    pace = sizes.live_tokens_per_second
    runs_list = sizes.server_runs
    longest = max(runs_list)
    tokens = int(sizes.live_seconds * pace)
    helix = clock_agent_settings(tokens, pace)
    headers = await sync_to_async(token_headers)()
    server = await sync_to_async(start_server)(helix)
    repeats = max(1, min(sizes.repeats, 2))
    rows: list[Row] = []
    limits = httpx.Limits(max_connections=longest + 10, max_keepalive_connections=longest + 10)
    try:
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            try:
                await _measure(client, server, 1, tokens, pace * 20, headers, bare=False)  # warm-up
            except (httpx.HTTPError, AssertionError) as exc:
                return [not_available(NAME, "live generations over SSE", f"the chat route did not stream ({exc!r})")]
            for runs in runs_list:
                name = f"database/sqlite via {server_name()} SSE: {runs} runs x {pace:.0f} tok/s"
                try:
                    length = int((sizes.live_seconds + runs * START_ALLOWANCE_SECONDS_PER_RUN) * pace)
                    rows += await _config(client, server, runs, length, pace, headers, repeats, name)
                except (httpx.HTTPError, AssertionError) as exc:
                    rows.append(not_available(NAME, name, f"failed: {exc!r}"[:300]))
    finally:
        await sync_to_async(server.stop)()
    return rows


def clock_agent_settings(tokens: int, pace: float) -> dict:
    """HELIX settings of a server whose default agent is the benchmark's clock provider."""
    return {
        "AGENTS": {
            "default": {
                "PROVIDER": {
                    "BACKEND": "bench.provider.ClockProvider",
                    "OPTIONS": {"TOKENS": tokens, "PACE_TPS": pace},
                },
                "MODEL": "clock-1",
                "SYSTEM_PROMPT": "You are a benchmark.",
                "TOOLS": [],
            }
        }
    }


PEER_NAME = "django-eventstream (database storage)"
PEER_NOTE = "the peer saves one Event row per delta (send_event) and serves its own SSE view (bench/peers.py)"


def peer_rows(
    name: str, mine: dict[str, list[float]], peer: dict[str, list[float]], error: str, duplicates: int = 0
) -> list[Row]:
    """Helix's delay p50/p99 (ms) and CPU per 1 000 deltas (s) next to django-eventstream's, same repeats.

    ``peer`` holds the peer's per-repeat samples under ``p50``, ``p99``, ``cpu``; with
    ``error`` (or no sample) one "not available" row says why. No target: the ratio is
    helix / peer (below 1: helix does better). ``duplicates``: deltas the peer delivered twice
    in a response (dropped before the delay samples), given in the CPU row's note.
    """
    if error or not peer["cpu"]:
        return [not_available(NAME, f"{name}: next to {PEER_NAME}", error or "not measured")]
    labels = {"p50": ("delay p50", "ms"), "p99": ("delay p99", "ms"), "cpu": ("server CPU per 1000 deltas", "s")}
    count = len(peer["cpu"])  # a repeat that failed ends the peer's samples: pair the repeats both have
    return [
        Row(
            NAME,
            f"{name}: {label} next to a peer",
            value=Stat.of(mine[key][:count], unit),
            baseline_name=PEER_NAME,
            baseline=Stat.of(peer[key], unit),
            ratio=paired_ratio(mine[key][:count], peer[key]),
            note=f"{PEER_NOTE}; {duplicates} deltas delivered twice, dropped" if key == "cpu" else "",
        )
        for key, (label, unit) in labels.items()
    ]
