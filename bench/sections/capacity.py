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

import uuid

from bench.config import Sizes, redis_backend
from bench.harness import Row, not_available
from bench.peers import eventstream_missing
from bench.sections.capacity_pg import bench_database, postgres_rows
from bench.sections.capacity_rows import LABELS, NAME, Adder, ratio_rows
from bench.sections.capacity_sweep import measure_setup


def wanted(sizes: Sizes, route: str) -> bool:
    """Whether this run sweeps ``route`` (every route unless ``--capacity-routes`` names some)."""
    return not sizes.capacity_routes or route in sizes.capacity_routes


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
