"""Capacity: how many live runs at 50 tok/s a server carries with the delivery delay p99 <= 100 ms.

For each server (daphne and uvicorn: ``Sizes.capacity_servers``) and each route, a sweep
raises the number of live responses read at once (:mod:`bench.sections.capacity_load`: raw
HTTP/1.1 clients, each response a run of ``live_tokens_per_second`` timestamped deltas) from
``capacity_start``, doubling while the step's steady-state p99 stays <= :data:`LIMIT_MS` (and
every response ends with all its deltas), up to ``capacity_max``; then ``capacity_refine``
bisection steps between the last count that held and the first that did not. The figure is
the largest count that held (one step per count: a noisy machine moves it by a step).
``--capacity-routes`` and ``--capacity-servers`` run a part of the sweep (e.g. a repeat of a row).

Routes, one server process each: helix's chat POST with the database stream manager on
SQLite, and with the Redis stream manager; the durable floor (``/bench/sse?store=1``: bare
SSE + one SQLite commit per delta); the bare SSE route (no Django, no storage); the peer,
django-eventstream with its database storage (:mod:`bench.peers`), when it is installed.
Two processes: two servers of the same kind on two ports, the client splitting the runs
evenly between them (round-robin; a load balancer's share, without one in the path), with
the Redis stream manager, and with the database manager on SQLite plus channels_redis
(both processes write one SQLite file: SQLite serialises writers across processes). The
deployment docs/production.md describes for several processes is PostgreSQL + channels_redis:
the database manager on a PostgreSQL database of the bench's own (:mod:`bench.postgres`,
``HELIX_BENCH_DATABASE_URL``; pooled as that page sets it) with channels_redis, one and two
processes (:mod:`bench.sections.capacity_pg`); its rows also give the PostgreSQL server's and
redis-server's CPU per delta. Without a PostgreSQL they print "skipped: no PostgreSQL".
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
from bench.harness import Row, not_available
from bench.peers import eventstream_missing
from bench.postgres import DEFAULT_VARIABLE
from bench.sections.capacity_load import Step, Target, step
from bench.sections.capacity_rows import LABELS, LIMIT_MS, NAME, START_SECONDS_PER_RUN, Adder, ratio_rows


async def sweep(targets: list[Target], route: str, sizes: Sizes, auth: str, database: str = "") -> list[Step]:
    """Return the steps of one sweep (doubling, then bisection), in the order measured.

    ``database``: the servers' PostgreSQL database (each step records its server's CPU).
    """
    pace = sizes.live_tokens_per_second
    steps: list[Step] = []

    async def measure(runs: int) -> Step:
        tokens = int((sizes.capacity_seconds + 1.0 + runs * START_SECONDS_PER_RUN) * pace)
        measured = await step(targets, route, runs, tokens, pace, auth, database)
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


def start(server: str, count: int, manager: dict | None, layer_prefix: str = "", database_url: str = ""):
    """Start ``count`` ``server`` processes on ``bench.asgi`` (their own ports); return the LiveServers.

    ``database_url``: their default database is this PostgreSQL database (:mod:`bench.postgres`).
    """
    from django.conf import settings

    from bench.sections.sse import clock_agent_settings
    from tests.live import LiveServer

    helix = clock_agent_settings(100, 50.0)
    if manager:
        helix["STREAM_MANAGERS"] = {"default": manager}
    env = {"HELIX_BENCH_DIR": settings.BENCH_DIR, "HELIX_BENCH_OVERRIDES": json.dumps(helix)}
    if layer_prefix:
        env["HELIX_BENCH_CHANNEL_LAYER_PREFIX"] = layer_prefix
    if database_url:
        env[DEFAULT_VARIABLE] = database_url
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
    """Start ``count`` servers, sweep each of ``routes``; return ``{route: steps}`` (or ``{route: reason}``).

    ``setup``: ``manager`` (a STREAM_MANAGERS entry), ``layer_prefix`` (channels_redis),
    ``database`` (a :class:`bench.postgres.BenchDatabase`). ``out["load"]``: the load average
    (1 min) at the start and the end.
    """
    import os

    from asgiref.sync import sync_to_async

    from bench.sections.capacity_load import NO_STEADY_STATE
    from bench.sections.capacity_load import step as one_step

    database = setup.get("database")
    url, name = (database.url, database.name) if database else ("", "")
    started = os.getloadavg()[0]
    servers = await sync_to_async(start)(server, count, setup.get("manager"), setup.get("layer_prefix", ""), url)
    out: dict = {}
    try:
        targets = [Target(s.host, s.port, s.process.pid) for s in servers]
        for route in routes:
            wire = "helix" if route.startswith("helix") else route
            warm = await one_step(targets, wire, 2 * count, 10, 50.0, auth)  # imports, connections
            streamed = not warm.error or warm.error == NO_STEADY_STATE  # a slow start is the sweep's to judge
            out[route] = (
                await sweep(targets, wire, sizes, auth, name) if streamed else f"the route did not stream: {warm.error}"
            )
    finally:
        for live in servers:
            await sync_to_async(live.stop)()
    out["load"] = f"load average {started:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    return out


def wanted(sizes: Sizes, route: str) -> bool:
    """Whether this run sweeps ``route`` (every route unless ``--capacity-routes`` names some)."""
    return not sizes.capacity_routes or route in sizes.capacity_routes


async def run(sizes: Sizes) -> list[Row]:
    """Return the capacity rows: counts per server, route and process count, then their ratios."""
    from asgiref.sync import sync_to_async

    from bench.sections.capacity_pg import bench_database, postgres_rows
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
    database, pg_reason = await bench_database(sizes, auth, wanted(sizes, "helix-pg"))
    try:
        for server in sizes.capacity_servers:
            counts: dict[str, int] = {}
            add = Adder(server, sizes, rows, counts)
            routes = ["helix-db", "floor", "bare"] + ([] if peer_reason else ["eventstream"])
            routes = [route for route in routes if wanted(sizes, route)]
            if routes:
                found = await measure_setup(server, 1, routes, sizes, auth)
                for label in routes:
                    add(label, found, label, 1)
            if peer_reason and wanted(sizes, "eventstream"):
                rows.append(not_available(NAME, f"{LABELS['eventstream']} via {server}", peer_reason))
            if isinstance(redis, str):
                if wanted(sizes, "helix-redis"):
                    rows.append(not_available(NAME, f"{LABELS['helix-redis']} via {server}", redis))
            elif wanted(sizes, "helix-redis"):
                found = await measure_setup(server, 1, ["helix-redis"], sizes, auth, manager=redis)
                add("helix-redis", found, "helix-redis", 1)
            two = [route for route in ("helix-redis", "helix-db") if wanted(sizes, route)]
            if two and (two_reason or not sizes.capacity_two_processes):
                rows.append(not_available(NAME, f"two processes via {server}", two_reason or "not run at this size"))
                two = []
            if "helix-redis" in two:
                found = await measure_setup(server, 2, ["helix-redis"], sizes, auth, manager=redis)
                add("helix-redis", found, "helix-redis", 2)
            if "helix-db" in two:
                prefix = f"helix-bench-{uuid.uuid4().hex}"
                found = await measure_setup(server, 2, ["helix-db"], sizes, auth, layer_prefix=prefix)
                add("helix-db", found, "helix-db", 2)
            if wanted(sizes, "helix-pg"):
                rows += await postgres_rows(server, sizes, auth, add, database, pg_reason)
            rows += ratio_rows(server, counts)
    finally:
        if database is not None:
            await sync_to_async(database.drop)()
    return rows
