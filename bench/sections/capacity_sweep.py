"""The capacity sweep: start a server setup, and raise its live runs until the delivery delay p99 passes the limit.

:func:`measure_setup` starts ``count`` server processes (a stream manager, channels_redis
prefix or PostgreSQL database of the caller's choosing), sweeps each route on them
(:func:`sweep`: doubling from ``capacity_start``, then bisection) and stops them;
:mod:`bench.sections.capacity` and :mod:`bench.sections.capacity_pg` turn its steps into rows.
"""

from __future__ import annotations

import json

from bench.config import Sizes
from bench.postgres import DEFAULT_VARIABLE
from bench.sections.capacity_load import Step, Target, step
from bench.sections.capacity_rows import LIMIT_MS, START_SECONDS_PER_RUN


async def sweep(targets: list[Target], route: str, sizes: Sizes, auth: str, database: str = "") -> list[Step]:
    """Return the steps of one sweep (doubling, then bisection), in the order measured.

    A count that fails while doubling is measured once more before the sweep stops doubling:
    one stalled step (the machine is shared) would otherwise leave every larger count untried.
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
        if not (await measure(runs)).holds(LIMIT_MS) and not (await measure(runs)).holds(LIMIT_MS):
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
