"""Capacity: how many live runs at 50 tok/s a server carries with the delivery delay p99 <= 100 ms.

For each server (daphne and uvicorn: ``Sizes.capacity_servers``) and each route, a sweep
raises the number of live responses read at once (:mod:`bench.sections.capacity_load`: raw
HTTP/1.1 clients, each response a run of ``live_tokens_per_second`` timestamped deltas) from
``capacity_start``, doubling while the step's steady-state p99 stays <= :data:`LIMIT_MS` (and
every response ends with all its deltas), up to ``capacity_max``; then ``capacity_refine``
bisection steps between the last count that held and the first that did not. The figure is
the largest count that held (one step per count: a noisy machine moves it by a step).

Routes, one server process each: helix's chat POST with the database stream manager on
SQLite, and with the Redis stream manager; the durable floor (``/bench/sse?store=1``: bare
SSE + one SQLite commit per delta); the bare SSE route (no Django, no storage); the peer,
django-eventstream with its database storage (:mod:`bench.peers`), when it is installed.
Two processes: two servers of the same kind on two ports, the client splitting the runs
evenly between them (round-robin; a load balancer's share, without one in the path), with
the Redis stream manager, and with the database manager on SQLite plus channels_redis.
Targets: helix's count >= 0.7x the durable floor's on one process (each manager), and
two processes' count >= 1.7x one process's (the two-process database manager with
channels_redis is compared with one process of the database manager, in-memory layer).

The client runs in this process and shares the machine's cores with the servers: each
count's note gives the client's and the servers' CPU (cores busy) at the first count that
failed; where the client was near one full core there, the load generator, not the server,
was the limit and the row says so.
"""

from __future__ import annotations

import json
import uuid

from bench.config import Sizes, redis_backend
from bench.harness import Row, Stat, not_available
from bench.peers import eventstream_missing
from bench.sections.capacity_load import Step, Target, step

NAME = "capacity"
LIMIT_MS = 100.0
"""A count holds while the steady-state delivery delay p99 is at most this (ms)."""
TARGET_FLOOR_RATIO = 0.7
TARGET_TWO_PROCESS_RATIO = 1.7
CLIENT_BOUND_CORES = 0.85
"""A failing step whose client used at least this many cores was limited by the load generator."""
START_SECONDS_PER_RUN = 0.01
"""Each step's responses last ``capacity_seconds`` plus this per run plus one second, so all overlap."""
LABELS = {
    "helix-db": "helix, database manager (SQLite)",
    "helix-redis": "helix, Redis manager",
    "floor": "durable floor (bare SSE + 1 SQLite commit/delta)",
    "bare": "bare ASGI SSE",
    "eventstream": "django-eventstream, database storage",
}


async def sweep(targets: list[Target], route: str, sizes: Sizes, auth: str) -> list[Step]:
    """Return the steps of one sweep (doubling, then bisection), in the order measured."""
    pace = sizes.live_tokens_per_second
    steps: list[Step] = []

    async def measure(runs: int) -> Step:
        tokens = int((sizes.capacity_seconds + 1.0 + runs * START_SECONDS_PER_RUN) * pace)
        measured = await step(targets, route, runs, tokens, pace, auth)
        steps.append(measured)
        return measured

    held, failed = 0, 0
    runs = sizes.capacity_start
    while runs <= sizes.capacity_max:
        if not (await measure(runs)).holds(LIMIT_MS):
            failed = runs
            break
        held, runs = runs, runs * 2
    for _ in range(sizes.capacity_refine):
        if not failed or failed - held <= max(2, held // 10):
            break
        middle = (held + failed) // 2
        if (await measure(middle)).holds(LIMIT_MS):
            held = middle
        else:
            failed = middle
    return steps


def held(steps: list[Step]) -> int:
    """The largest count of ``steps`` that held (0 when none did)."""
    return max((s.runs for s in steps if s.holds(LIMIT_MS)), default=0)


def count_row(name: str, steps: list[Step], sizes: Sizes, *, redis: bool = False) -> Row:
    """The row of one sweep: the largest count held, the steps and who was busy where it stopped.

    ``redis``: also give redis-server's CPU per delivered delta at the largest count held.
    """
    count = held(steps)
    failing = [s for s in steps if not s.holds(LIMIT_MS)]
    trail = ", ".join(s.describe(LIMIT_MS) for s in steps)
    if failing:
        first = min(failing, key=lambda s: s.runs)
        busy = f"at {first.runs}: client {first.client_cores:.2f} cores, servers {first.server_cores:.2f} cores"
        if first.client_cores >= CLIENT_BOUND_CORES:
            busy += "; the load generator was the limit, not the server"
    else:
        busy = f"held up to the sweep's cap ({sizes.capacity_max}): a lower bound"
    top = max((s for s in steps if s.holds(LIMIT_MS)), key=lambda s: s.runs, default=None)
    if redis and top is not None and top.deltas:
        busy += f"; redis-server CPU at {top.runs}: {top.redis_seconds / top.deltas * 1e6:.0f} us per delta"
    return Row(NAME, name, value=Stat.of([count], "runs"), note=f"{trail}; {busy} (the client shares the cores)")


def ratio_row(name: str, value: int, base: int, baseline_name: str, limit: float | None, against: str) -> Row:
    """A ratio of two counts with its target (``>= limit x against``; none when ``limit`` is None).

    No verdict when ``base`` is 0.
    """
    ratio = Stat.of([value / base], "x") if base else None
    return Row(
        NAME,
        name,
        value=Stat.of([value], "runs"),
        baseline_name=baseline_name,
        baseline=Stat.of([base], "runs"),
        ratio=ratio,
        target="" if limit is None else f">= {limit:g}x {against}",
        holds=None if ratio is None or limit is None else ratio.median >= limit,
    )


def start(server: str, count: int, manager: dict | None, layer_prefix: str = ""):
    """Start ``count`` ``server`` processes on ``bench.asgi`` (their own ports); return the LiveServers."""
    from django.conf import settings

    from bench.sections.sse import clock_agent_settings
    from tests.live import LiveServer

    helix = clock_agent_settings(100, 50.0)
    if manager:
        helix["STREAM_MANAGERS"] = {"default": manager}
    env = {"HELIX_BENCH_DIR": settings.BENCH_DIR, "HELIX_BENCH_OVERRIDES": json.dumps(helix)}
    if layer_prefix:
        env["HELIX_BENCH_CHANNEL_LAYER_PREFIX"] = layer_prefix
    servers = []
    try:
        for _ in range(count):
            servers.append(
                LiveServer(
                    asgi_app="bench.asgi:application", settings_module="bench.settings", env=env, server=server
                ).start()
            )
    except BaseException:
        for live in servers:
            live.stop()
        raise
    return servers


async def measure_setup(server: str, count: int, routes: list[str], sizes: Sizes, auth: str, **setup) -> dict:
    """Start ``count`` servers, sweep each of ``routes``; return ``{route: steps}`` (or ``{route: reason}``)."""
    from asgiref.sync import sync_to_async

    from bench.sections.capacity_load import step as one_step

    servers = await sync_to_async(start)(server, count, setup.get("manager"), setup.get("layer_prefix", ""))
    out: dict = {}
    try:
        targets = [Target(s.host, s.port, s.process.pid) for s in servers]
        for route in routes:
            wire = "helix" if route.startswith("helix") else route
            warm = await one_step(targets, wire, 2 * count, 10, 50.0, auth)  # imports, connections
            out[route] = (
                f"the route did not stream: {warm.error}" if warm.error else await sweep(targets, wire, sizes, auth)
            )
    finally:
        for live in servers:
            await sync_to_async(live.stop)()
    return out


async def run(sizes: Sizes) -> list[Row]:
    """Return the capacity rows: counts per server, route and process count, then their ratios."""
    from asgiref.sync import sync_to_async

    from bench.sections.crossprocess import missing as two_process_missing
    from bench.sections.e2e import missing, token_headers

    reason = missing()
    if reason:
        return [not_available(NAME, "live runs held at p99 <= 100 ms", reason)]
    auth = (await sync_to_async(token_headers)())["Authorization"]
    redis = redis_backend()
    peer_reason = eventstream_missing()
    two_reason = two_process_missing() or (redis if isinstance(redis, str) else "")
    rows: list[Row] = []
    for server in sizes.capacity_servers:
        counts: dict[str, int] = {}

        add = _Adder(server, sizes, rows, counts)
        routes = ["helix-db", "floor", "bare"] + ([] if peer_reason else ["eventstream"])
        found = await measure_setup(server, 1, routes, sizes, auth)
        for label in routes:
            add(label, found, label, 1)
        if peer_reason:
            rows.append(not_available(NAME, f"{LABELS['eventstream']} via {server}", peer_reason))
        if isinstance(redis, str):
            rows.append(not_available(NAME, f"{LABELS['helix-redis']} via {server}", redis))
        else:
            add(
                "helix-redis",
                await measure_setup(server, 1, ["helix-redis"], sizes, auth, manager=redis),
                "helix-redis",
                1,
            )
        if two_reason or not sizes.capacity_two_processes:
            rows.append(not_available(NAME, f"two processes via {server}", two_reason or "not run at this size"))
        else:
            found = await measure_setup(server, 2, ["helix-redis"], sizes, auth, manager=redis)
            add("helix-redis", found, "helix-redis", 2)
            prefix = f"helix-bench-{uuid.uuid4().hex}"
            found = await measure_setup(server, 2, ["helix-db"], sizes, auth, layer_prefix=prefix)
            add("helix-db", found, "helix-db", 2)
        rows += ratio_rows(server, counts)
    return rows


class _Adder:
    """Adds one sweep's count row to ``rows`` and its count to ``counts`` (key ``<label>/<processes>``)."""

    def __init__(self, server: str, sizes: Sizes, rows: list[Row], counts: dict[str, int]) -> None:
        self.server, self.sizes, self.rows, self.counts = server, sizes, rows, counts

    def __call__(self, label: str, found: dict, key: str, processes: int) -> None:
        """Add the row of ``found[key]`` (steps, or why the route could not be swept)."""
        name = f"{LABELS[label]} via {self.server}, {processes} process{'es' if processes > 1 else ''}: runs held"
        if isinstance(found[key], str):
            self.rows.append(not_available(NAME, name, found[key]))
            return
        self.counts[f"{label}/{processes}"] = held(found[key])
        self.rows.append(count_row(name, found[key], self.sizes, redis="redis" in label or processes > 1))


def ratio_rows(server: str, counts: dict[str, int]) -> list[Row]:
    """The targets: helix / durable floor on one process, two processes / one (per manager)."""
    rows = []
    floor = counts.get("floor/1")
    for label in ("helix-db", "helix-redis"):
        if f"{label}/1" in counts and floor is not None:
            rows.append(
                ratio_row(
                    f"{LABELS[label]} via {server}: runs held vs the durable floor's",
                    counts[f"{label}/1"],
                    floor,
                    "durable floor, 1 process",
                    TARGET_FLOOR_RATIO,
                    "floor",
                )
            )
        if f"{label}/1" in counts and "eventstream/1" in counts:
            peer = LABELS["eventstream"]
            rows.append(
                ratio_row(
                    f"{LABELS[label]} via {server}: runs held vs the peer's",
                    counts[f"{label}/1"],
                    counts["eventstream/1"],
                    f"{peer}, 1 process",
                    None,
                    "peer",
                )
            )
        if f"{label}/2" in counts and f"{label}/1" in counts:
            extra = " + channels_redis" if label == "helix-db" else ""
            rows.append(
                ratio_row(
                    f"{LABELS[label]}{extra} via {server}: runs held by 2 processes vs 1",
                    counts[f"{label}/2"],
                    counts[f"{label}/1"],
                    "1 process",
                    TARGET_TWO_PROCESS_RATIO,
                    "1 process",
                )
            )
    return rows
