"""The capacity section's load generator: N live SSE responses at once over raw HTTP/1.1, their delays.

One step opens ``runs`` responses at once (a few at a time, :data:`OPEN_BATCH`), spread
round-robin over one or more server processes, and reads each to ``data: [DONE]``. Every
text delta carries its emission time (``time.perf_counter()``: :class:`bench.provider.ClockProvider`
and :func:`bench.frames.paced_deltas`); a delay sample is receive time minus emission time,
in ms, for every delta emitted while all ``runs`` were live (steady state): after every
response got its first delta and before any response's last delta. The starts and the
endings of a step come in bursts (every response opens within a few hundred ms and has
the same length), which no steady load has; what they cost is the server's, and shows in
the run-start and completion rows of the other sections, not in "runs held".

The client is asyncio streams and a regular expression, not httpx: at hundreds of
responses x 50 deltas/s the client shares the machine's cores with the servers, and httpx
with httpx-sse spent several times the servers' CPU per delta. Each step also records the
client's CPU (this process, cores busy over the step's wall time) and the servers'
(/proc utime+stime of each server process), so a row can say when the load generator,
not the server, was the limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import time
import uuid

from bench.harness import count_deltas
from bench.postgres import cpu_seconds, cpu_snapshot
from bench.sections.sse import _proc_cpu_seconds

OPEN_BATCH = 25
"""Responses opened together; the next batch opens after :data:`OPEN_PAUSE_SECONDS` (no SYN floods)."""
OPEN_PAUSE_SECONDS = 0.01
DELTA = re.compile(rb'"type":"text-delta".*?"delta":"([0-9. ]*)"')
DONE = b"data: [DONE]"
NO_STEADY_STATE = "the last response started after the first one ended (no steady state)"


@dataclasses.dataclass
class Target:
    """One server process: loopback ``host:port`` and its pid (for its CPU)."""

    host: str
    port: int
    pid: int


@dataclasses.dataclass
class Step:
    """One step of a sweep: ``runs`` responses at once.

    ``p50``/``p99``: steady-state delay in ms; ``client_cores``/``server_cores``: CPU seconds
    per wall second of this process and of all server processes together over the step;
    ``error``: why the step failed outright ('' when every response ended with ``[DONE]``
    carrying every delta).
    """

    runs: int
    p50: float = 0.0
    p99: float = 0.0
    client_cores: float = 0.0
    server_cores: float = 0.0
    error: str = ""
    deltas: int = 0
    """Deltas the step delivered (every response's)."""
    duplicates: int = 0
    """Deltas the peer route delivered twice in one response (dropped; helix's and the bare routes' are not)."""
    redis_seconds: float = 0.0
    """CPU seconds of the machine's redis-server processes over the step (shared: others' load counts too)."""
    pg_measured: bool = False
    """Whether the step read the PostgreSQL server's CPU (its servers ran on PostgreSQL)."""
    pg_seconds: float = 0.0
    """CPU seconds of the bench database's PostgreSQL backends over the step (0 off PostgreSQL)."""
    pg_background_seconds: float = 0.0
    """CPU seconds of the PostgreSQL server's background processes (WAL writer, ...: shared) over the step."""

    def holds(self, limit_ms: float) -> bool:
        """Whether the step carried every response with p99 within ``limit_ms``."""
        return not self.error and self.p99 <= limit_ms

    def describe(self, limit_ms: float) -> str:
        """``"<runs>: p99 <ms> ok|FAIL"`` plus the error, for a row's note."""
        again = f" ({self.duplicates} duplicates dropped)" if self.duplicates else ""
        if self.error:
            return f"{self.runs}: FAIL ({self.error}){again}"
        return f"{self.runs}: p99 {self.p99:.0f} ms {'ok' if self.holds(limit_ms) else 'FAIL'}{again}"


def _redis_cpu_seconds() -> float:
    """CPU seconds so far of every ``redis-server`` process this user can read (0 when none)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                if handle.read().strip() == "redis-server":
                    total += _proc_cpu_seconds(int(entry))
        except OSError:
            continue
    return total


class _Sample:
    def __init__(self) -> None:
        self.delays: list[tuple[float, float]] = []
        self.first: list[float] = []
        self.last: list[float] = []
        """Per response, the emission time of its last delta."""
        self.deltas = 0
        self.duplicates = 0


def request_bytes(route: str, target: Target, tokens: int, pace: float, auth: str) -> bytes:
    """The HTTP/1.1 request of one response of ``route``: ``helix``, ``floor``, ``bare`` or ``eventstream``.

    ``helix`` POSTs a new session's chat message (``tokens=<n>``: the clock provider's reply
    length) with ``auth`` as its Authorization header; ``floor``/``bare`` GET the bare SSE route
    with and without a SQLite commit per delta; ``eventstream`` GETs the peer route
    (:mod:`bench.peers`), which publishes the deltas through django-eventstream.
    """
    host = f"{target.host}:{target.port}"
    if route == "helix":
        session_id = f"bench_cap_{uuid.uuid4().hex[:12]}"
        text = f"tokens={tokens}"
        message = {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": text}]}
        body = json.dumps({"id": session_id, "messages": [message], "trigger": "submit-message"}).encode()
        head = (
            f"POST /helix/api/sessions/{session_id}/chat HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body
    paths = {
        "floor": f"/bench/sse?tokens={tokens}&pace={pace}&store=1",
        "bare": f"/bench/sse?tokens={tokens}&pace={pace}",
        "eventstream": f"/bench/peers/eventstream?tokens={tokens}&pace={pace}",
    }
    return f"GET {paths[route]} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


async def follow(target: Target, request: bytes, sample: _Sample, *, unique: bool = False) -> None:
    """Send ``request``, read the SSE body to ``data: [DONE]``, record each delta's delay.

    Raises AssertionError on a status other than 200 or a body that ends without ``[DONE]``.
    Chunked transfer encoding is not undone: the pattern matches within one delta's
    frame, which each server writes in one piece. ``unique``: drop (and count) a delta this
    response already delivered (django-eventstream re-sends the events of its first read
    when an event arrives during that read).
    """
    seen: set[bytes] = set()
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"200", head[:200]
        pending = b""
        first = True
        last = 0.0
        while True:
            data = await reader.read(65536)
            now = time.perf_counter()
            if not data:
                raise AssertionError("the body ended without [DONE]")
            pending += data
            cut = pending.rfind(b"\n\n")
            if cut < 0:
                continue
            complete, pending = pending[: cut + 2], pending[cut + 2 :]
            for match in DELTA.finditer(complete):
                if count_deltas(sample, match.group(1), now, seen if unique else None) and first:
                    sample.first.append(now)
                    first = False
                last = max([last, *(float(token) for token in match.group(1).split())])
            if DONE in complete:
                sample.last.append(last)
                return
    finally:
        writer.close()


async def step(
    targets: list[Target], route: str, runs: int, tokens: int, pace: float, auth: str, database: str = ""
) -> Step:
    """Open ``runs`` responses of ``route`` at once over ``targets`` (round-robin); return the step.

    ``database``: the servers' PostgreSQL database, whose server's CPU the step also records.
    """
    sample = _Sample()
    result = Step(runs)
    wall, client = time.perf_counter(), time.process_time()
    servers = sum(_proc_cpu_seconds(t.pid) for t in targets)
    redis = _redis_cpu_seconds()
    postgres = cpu_snapshot(database) if database else {}
    tasks = []
    for index in range(runs):
        target = targets[index % len(targets)]
        request = request_bytes(route, target, tokens, pace, auth)
        tasks.append(asyncio.ensure_future(follow(target, request, sample, unique=route == "eventstream")))
        if index % OPEN_BATCH == OPEN_BATCH - 1:
            await asyncio.sleep(OPEN_PAUSE_SECONDS)
    done = await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.perf_counter() - wall
    result.client_cores = (time.process_time() - client) / elapsed
    result.server_cores = (sum(_proc_cpu_seconds(t.pid) for t in targets) - servers) / elapsed
    result.redis_seconds = _redis_cpu_seconds() - redis
    if database:
        result.pg_seconds, result.pg_background_seconds = cpu_seconds(postgres, cpu_snapshot(database))
        result.pg_measured = True
    result.deltas = sample.deltas
    result.duplicates = sample.duplicates
    failed = [outcome for outcome in done if isinstance(outcome, BaseException)]
    if failed:
        result.error = f"{len(failed)} of {runs} responses failed: {failed[0]!r}"[:160]
        return result
    if sample.deltas != runs * tokens:
        result.error = f"{sample.deltas} of {runs * tokens} deltas arrived"
        return result
    cutoff, end = max(sample.first), min(sample.last)
    steady = sorted(delay for emitted, delay in sample.delays if cutoff <= emitted <= end)
    if not steady:
        result.error = NO_STEADY_STATE
        return result
    result.p50 = steady[len(steady) // 2]
    result.p99 = steady[min(len(steady) - 1, int(0.99 * len(steady)))]
    return result
