"""Raw baselines: the same rows written with the bare driver, no Django, no manager.

Each baseline writes the rows the manager writes (same table, same columns, same
pre-encoded payload), in the same batches, one transaction (or pipeline) per batch:
the ratio then measures what the manager adds, not a different workload.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from django.conf import settings

from bench.payloads import Timer, batches, encoded

INSERT = "INSERT INTO helix_django_streamchunk (stream_id, sequence, run_id, attempt_id, step, type, payload) VALUES "


def chunk_rows(stream_id: str, run_id: str, chunks: list[dict[str, Any]]) -> list[tuple]:
    """Return the rows of ``chunks`` (sequences from 1), payload pre-encoded."""
    return [(stream_id, seq, run_id, "", 0, chunk["type"], encoded(chunk)) for seq, chunk in enumerate(chunks, start=1)]


def sqlite_connect() -> sqlite3.Connection:
    """Open the bench SQLite file with the pragmas of the embedded default."""
    conn = sqlite3.connect(settings.DATABASES["default"]["NAME"], isolation_level=None, timeout=20)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def sqlite_append(rows: list[tuple], batch: int) -> float:
    """Insert ``rows`` with ``executemany``, one IMMEDIATE transaction per batch; return seconds."""
    conn = sqlite_connect()
    sql = INSERT + "(?, ?, ?, ?, ?, ?, ?)"
    try:
        with Timer() as timer:
            for part in batches(rows, batch):
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(sql, part)
                conn.execute("COMMIT")
    finally:
        conn.close()
    return timer.seconds


def postgres_append(rows: list[tuple], batch: int) -> float:
    """Insert ``rows`` with psycopg ``executemany`` (pipelined), one transaction per batch; return seconds."""
    import psycopg

    url = settings.DATABASE_URL
    sql = INSERT + "(%s, %s, %s, %s, %s, %s, %s)"
    with psycopg.connect(url, autocommit=True) as conn:
        with Timer() as timer:
            for part in batches(rows, batch):
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(sql, part)
    return timer.seconds


def redis_append(key: str, payloads: list[str], batch: int) -> float:
    """XADD ``payloads`` to ``key`` with a redis-py pipeline per batch; return seconds."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    client.ping()  # connect outside the timed part, like the manager's warm client
    try:
        with Timer() as timer:
            for part in batches(payloads, batch):
                pipe = client.pipeline(transaction=False)
                for payload in part:
                    pipe.xadd(key, {"c": payload})
                pipe.execute()
        client.delete(key)
    finally:
        client.close()
    return timer.seconds
