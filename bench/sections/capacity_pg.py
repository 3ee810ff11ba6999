"""The capacity section's PostgreSQL rows: the database manager on PostgreSQL + channels_redis, 1 and 2 processes.

docs/production.md's shape for several web processes: PostgreSQL (pooled), channels_redis.
The servers' default database is a PostgreSQL database of the bench's own
(:class:`bench.postgres.BenchDatabase`: created, migrated and given the bench user's token
once per run, dropped at the end), their stream manager the database manager (the default)
and their channel layer channels_redis under a fresh prefix, for one process and for two.
Each step also records the PostgreSQL server's CPU (that database's backends, and the
server's background processes) and redis-server's; the row gives both per delta at the
largest count held. Without a reachable PostgreSQL (``HELIX_BENCH_DATABASE_URL``) the row
says "skipped: no PostgreSQL".
"""

from __future__ import annotations

import uuid

from bench.config import Sizes
from bench.harness import Row, skipped
from bench.postgres import BenchDatabase
from bench.postgres import missing as postgres_missing
from bench.sections.capacity_rows import LABELS, NAME, Adder
from bench.sections.capacity_sweep import measure_setup


async def bench_database(sizes: Sizes, auth: str, wanted: bool) -> tuple[BenchDatabase | None, str]:
    """Create and prepare the bench's PostgreSQL database when its rows run; return it or why not."""
    from asgiref.sync import sync_to_async

    from bench.sections.crossprocess import missing as layer_missing

    if not wanted:
        return None, ""
    reason = await sync_to_async(postgres_missing)() or layer_missing()
    if reason:
        return None, reason
    token_key = auth.split(" ", 1)[1]
    return await sync_to_async(BenchDatabase().create)(token_key), ""


async def postgres_rows(
    server: str, sizes: Sizes, auth: str, add: Adder, database: BenchDatabase | None, reason: str
) -> list[Row]:
    """Sweep the database manager on ``database`` with one and two ``server`` processes (rows go to ``add``).

    Returns the rows ``add`` does not hold: a skipped row when there is no ``database``.
    """
    if database is None:
        return [skipped(NAME, f"{LABELS['helix-pg']} via {server}", reason)]
    for processes in (1, 2):
        prefix = f"helix-bench-{uuid.uuid4().hex}"
        found = await measure_setup(
            server, processes, ["helix-pg"], sizes, auth, layer_prefix=prefix, database=database
        )
        add("helix-pg", found, "helix-pg", processes)
    return []
