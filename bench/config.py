"""Benchmark sizes (full, ``--quick``, ``--tiny``) and the stream-manager backends to measure."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

from django.conf import settings


@dataclasses.dataclass
class Sizes:
    """How much each section does; the issues fix the full sizes."""

    repeats: int = 5
    append_chunks: int = 100_000
    batch_chunks: int = 64
    """Chunks per append (one flush of the stream writer: ``FLUSH_MAX_CHUNKS``)."""
    history_small: int = 1_000
    history_large: int = 100_000
    resume_reads: int = 20
    """Reconnects timed per repeat (the repeat's value is their median)."""
    tail_chunks: int = 100
    snapshot_messages: tuple[int, ...] = (10, 100, 1_000)
    snapshot_reads: int = 20
    live_runs: tuple[int, ...] = (100, 250, 500)
    live_fanout_readers: int = 1_000
    live_tokens_per_second: float = 50.0
    live_seconds: float = 4.0
    runtime_chunks: int = 2_000
    e2e_chunks: int = 500
    server_runs: tuple[int, ...] = (10, 100, 250, 500)
    """Concurrent runs of the sse section (through the server; the per-delta CPU target applies at 10 and 100)."""
    open_responses: int = 500
    """Resumes opened at once by the opens section (idle memory is measured with all of them open)."""
    capacity_start: int = 10
    """Live runs of the capacity sweep's first step (then doubled while p99 <= 100 ms)."""
    capacity_max: int = 1_600
    """The sweep's largest step: a count that holds here is a lower bound."""
    capacity_refine: int = 2
    """Bisection steps between the last count that held and the first that did not."""
    capacity_seconds: float = 3.0
    """Steady seconds of each step (plus a start allowance per run)."""
    capacity_servers: tuple[str, ...] = ("daphne", "uvicorn")
    capacity_two_processes: bool = True
    """Also sweep two server processes (Redis manager; database manager + channels_redis)."""
    capacity_routes: tuple[str, ...] = ()
    """The capacity routes to sweep (``--capacity-routes``); empty: every one."""

    @classmethod
    def preset(cls, name: str) -> Sizes:
        """Return ``full``, ``quick`` (minutes) or ``tiny`` (seconds: the smoke test)."""
        if name == "quick":
            return cls(
                repeats=3,
                append_chunks=20_000,
                history_large=20_000,
                resume_reads=10,
                snapshot_reads=10,
                live_runs=(100, 250),
                live_fanout_readers=250,
                live_seconds=2.0,
                runtime_chunks=1_000,
                e2e_chunks=200,
                server_runs=(10, 100),
                open_responses=200,
                capacity_start=10,
                capacity_max=800,
                capacity_seconds=2.0,
            )
        if name == "tiny":
            return cls(
                repeats=2,
                append_chunks=300,
                history_small=50,
                history_large=400,
                resume_reads=2,
                tail_chunks=20,
                snapshot_messages=(2, 10),
                snapshot_reads=2,
                live_runs=(5,),
                live_fanout_readers=5,
                live_seconds=0.3,
                runtime_chunks=50,
                e2e_chunks=20,
                server_runs=(5,),
                open_responses=5,
                capacity_start=4,
                capacity_max=4,
                capacity_refine=0,
                capacity_seconds=0.3,
                capacity_servers=("daphne",),
                capacity_two_processes=False,
            )
        return cls()


DATABASE_BACKEND = "helix_django.streams.database.DatabaseStreamManager"
MEMORY_BACKEND = "helix_django.streams.memory.MemoryStreamManager"
REDIS_BACKEND = "helix_django.streams.redis.RedisStreamManager"


def stream_backends() -> dict[str, dict[str, Any] | str]:
    """Return ``{label: STREAM_MANAGERS entry}``, or ``{label: reason}`` for one not measurable here."""
    out: dict[str, dict[str, Any] | str] = {
        "memory": {"BACKEND": MEMORY_BACKEND, "OPTIONS": {}},
        "database/sqlite": {"BACKEND": DATABASE_BACKEND, "OPTIONS": {"DATABASE": "default"}},
    }
    if "postgres" in settings.DATABASES:
        out["database/postgres"] = {"BACKEND": DATABASE_BACKEND, "OPTIONS": {"DATABASE": "postgres"}}
    else:
        out["database/postgres"] = "set HELIX_BENCH_DATABASE_URL to a PostgreSQL database"
    out["redis"] = redis_backend()
    return out


def redis_backend() -> dict[str, Any] | str:
    """Return the Redis stream manager entry, or why it cannot be measured."""
    if importlib.util.find_spec("helix_django.streams.redis") is None:
        return "helix_django/streams/redis.py has not landed"
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL).ping()
    except redis.RedisError:
        return f"no redis-server at {settings.REDIS_URL} (set HELIX_BENCH_REDIS_URL)"
    return {"BACKEND": REDIS_BACKEND, "OPTIONS": {"CONNECTION_ALIAS": "helix", "KEY_PREFIX": "helix:bench"}}
