"""Run the benchmarks: ``python -m bench [--quick|--tiny] [--append] [--resume] ...``.

Prints a table and writes JSON (default ``bench/results.json``, git-ignored). Without a
section flag every section runs. A section whose code has not landed prints
"not available" and does not fail the run. Exit status 0 unless a section crashed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import os
import shutil
import sys
import time
import traceback

SECTIONS = ("append", "resume", "snapshot", "runtime", "e2e", "live", "sse", "opens", "crossprocess", "capacity")
SECTION_HELP = {
    "append": "1. append throughput per stream manager vs raw driver",
    "resume": "2. resume cost vs history (first chunk, last 100 chunks)",
    "snapshot": "5. snapshot read at 10/100/1000 messages",
    "runtime": "executor + scripted provider (pace 0) into the database manager vs provider alone",
    "e2e": "3. end to end through the server's SSE chat route (HELIX_BENCH_SERVER: daphne or uvicorn)",
    "live": "4. many live generations on one process: stream-manager layer (delay p50/p99, CPU, memory)",
    "sse": "4. many live generations through the server's SSE chat route: per-delta CPU vs the durable floor",
    "opens": "resume opens through the server: CPU per open, idle memory per open response (vs the site's DRF view)",
    "capacity": "live runs at 50 tok/s one and two server processes carry at p99 <= 100 ms (client shares the cores)",
    "crossprocess": "a reader on another daphne process vs the local reader of the same run (channels_redis)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (a few minutes)")
    preset.add_argument("--tiny", action="store_true", help="minimal sizes: proves the command runs (smoke test)")
    parser.add_argument("--repeats", type=int, help="override the number of repeats")
    parser.add_argument("--output", default=os.path.join("bench", "results.json"), help="JSON output path")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SQLite directory")
    for name in SECTIONS:
        parser.add_argument(f"--{name}", action="store_true", help=SECTION_HELP[name])
    parser.add_argument(
        "--capacity-routes",
        help="comma-separated capacity routes to sweep (default all): helix-db, helix-redis, helix-pg "
        "(PostgreSQL + channels_redis, needs HELIX_BENCH_DATABASE_URL), floor, bare, eventstream",
    )
    parser.add_argument("--capacity-servers", help="comma-separated ASGI servers to sweep (daphne, uvicorn)")
    return parser.parse_args(argv)


def setup_django() -> None:
    """Configure Django with bench.settings and migrate every bench database."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    for alias in settings.DATABASES:
        call_command("migrate", database=alias, verbosity=0, interactive=False)


def cleanup_postgres() -> None:
    """Delete the rows the run wrote to a PostgreSQL bench database (only ``bench_*`` streams)."""
    from django.conf import settings
    from django.db import connections

    if "postgres" not in settings.DATABASES:
        return
    with connections["postgres"].cursor() as cursor:
        cursor.execute("DELETE FROM helix_django_streamchunk WHERE stream_id LIKE 'bench%%'")
        cursor.execute("DELETE FROM helix_django_stream WHERE stream_id LIKE 'bench%%'")


def cleanup_redis() -> None:
    """Delete the Redis keys the run wrote (``helix:bench:*`` in the bench Redis database)."""
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1)
        keys = list(client.scan_iter(match="helix:bench:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()
    except redis.RedisError:
        return  # no Redis here: nothing was written


async def run_sections(names: list[str], sizes) -> tuple[list, list[str]]:
    """Run ``names`` in order; return (rows, names of sections that crashed)."""
    from bench.harness import Row

    rows: list[Row] = []
    crashed: list[str] = []
    for name in names:
        started = time.perf_counter()
        print(f"... {name}: {SECTION_HELP[name]}", file=sys.stderr, flush=True)
        module = importlib.import_module(f"bench.sections.{name}")
        try:
            rows.extend(await module.run(sizes))
        except Exception:
            traceback.print_exc()
            crashed.append(name)
            rows.append(Row(name, "section crashed", note="see the traceback above", available=False))
        print(f"    {name} took {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return rows, crashed


def main(argv: list[str] | None = None) -> int:
    """Run the selected sections, print the table, write the JSON; return the exit status."""
    args = parse_args(argv)
    started_at, load_at_start = time.time(), os.getloadavg()
    setup_django()
    from django.conf import settings

    from bench.config import Sizes
    from bench.harness import format_table, machine, write_json

    preset = "quick" if args.quick else "tiny" if args.tiny else "full"
    sizes = Sizes.preset(preset)
    if args.repeats:
        sizes.repeats = args.repeats
    if args.capacity_routes:
        sizes.capacity_routes = tuple(route.strip() for route in args.capacity_routes.split(",") if route.strip())
    if args.capacity_servers:
        sizes.capacity_servers = tuple(name.strip() for name in args.capacity_servers.split(",") if name.strip())
    names = [name for name in SECTIONS if getattr(args, name)] or list(SECTIONS)
    try:
        rows, crashed = asyncio.run(run_sections(names, sizes))
    finally:
        cleanup_postgres()
        cleanup_redis()
        if not args.keep:
            shutil.rmtree(settings.BENCH_DIR, ignore_errors=True)
    info = machine(load_at_start)
    load = "load average at start {} and at end {}".format(
        *(", ".join(f"{x:.2f}" for x in info[key]) for key in ("load_avg_at_start", "load_avg_at_end"))
    )
    print(
        f"\nhelix_django benchmarks ({preset}, {sizes.repeats} repeats): {info['nproc']} cores, "
        f"{info['memory_gib']} GiB, Python {info['python']}, SQLite {info['sqlite']}; {load}"
    )
    print(format_table(rows))
    config = {"preset": preset, "sections": names, "sizes": dataclasses.asdict(sizes)}
    write_json(args.output, rows, config, started_at, info)
    print(f"\nwrote {args.output}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
