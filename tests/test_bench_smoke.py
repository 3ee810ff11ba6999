"""The benchmark command still runs (docs/performance.md); the benchmark itself is not a test.

Runs ``python -m bench --tiny`` (every section at minimal sizes) in a subprocess with its
own temporary SQLite file, and checks the JSON it writes: every section reports rows,
each measured row carries a median within its min..max, and a section whose code or
server is missing says why instead of failing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SECTIONS = {"append", "resume", "snapshot", "runtime", "e2e", "live", "sse", "opens", "crossprocess", "capacity"}


@pytest.mark.timeout(300)
def test_bench_command_runs_with_tiny_sizes_and_writes_its_table_and_json(tmp_path):
    output = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_BENCH_", "DJANGO_SETTINGS_MODULE"))}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--tiny", "--output", str(output)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "median" in done.stdout and "baseline (median)" in done.stdout
    data = json.loads(output.read_text())
    assert data["config"]["preset"] == "tiny"
    assert data["machine"]["nproc"] >= 1
    rows = data["rows"]
    assert {row["section"] for row in rows} == SECTIONS
    assert not [row for row in rows if row["name"] == "section crashed"]
    measured = [row for row in rows if row["available"]]
    assert {row["section"] for row in measured} >= {"append", "resume", "snapshot", "live"}
    for row in measured:
        value = row["value"]
        assert value["min"] <= value["median"] <= value["max"], row["name"]
        assert len(value["samples"]) >= 1
        if row["baseline"] is not None:
            assert row["ratio"] is not None or row["section"] in ("live", "sse", "opens", "capacity"), row["name"]
    for row in rows:
        if not row["available"]:
            assert row["note"].startswith(("not available: ", "skipped: ")), row
    assert data["machine"]["load_avg_at_start"] and data["machine"]["load_avg_at_end"]
    sqlite_append = next(r for r in measured if r["name"].startswith("database/sqlite") and r["section"] == "append")
    assert sqlite_append["baseline_name"] == "sqlite3 executemany"
    assert sqlite_append["holds"] in (True, False)
    sse_rows = [r for r in measured if r["section"] == "sse"]
    if sse_rows:  # through the server: the durable floor is measured beside the bare route
        floor = [r for r in sse_rows if r["baseline_name"] == "bare SSE + 1 SQLite commit/delta"]
        assert floor and floor[0]["ratio"]["median"] > 0, [r["name"] for r in sse_rows]
    capacity = [r for r in measured if r["section"] == "capacity" and r["name"].endswith("runs held")]
    if [r for r in measured if r["section"] == "e2e"]:  # the server streamed: every route was swept
        assert capacity and all(r["value"]["unit"] == "runs" for r in capacity), [r["name"] for r in rows]
    host_rows = [r for r in measured if r["baseline_name"].startswith("site's authenticated DRF")]
    if [r for r in measured if r["section"] == "e2e"]:  # the site's own authenticated endpoint answered 200
        assert {r["section"] for r in host_rows} >= {"e2e"}, [r["name"] for r in measured]
        assert all(r["baseline"]["median"] > 0 for r in host_rows), host_rows


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_bench_capacity_runs_the_database_manager_on_a_postgresql_database_of_its_own(tmp_path):
    """``--capacity-routes helix-pg``: one and two processes on PostgreSQL + channels_redis, then the database is gone."""
    url = os.environ.get("HELIX_TEST_DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("no PostgreSQL (HELIX_TEST_DATABASE_URL)")
    output = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_BENCH_", "DJANGO_SETTINGS_MODULE"))}
    env["HELIX_BENCH_DATABASE_URL"] = url
    command = [sys.executable, "-m", "bench", "--tiny", "--capacity", "--capacity-routes", "helix-pg"]
    with subprocess.Popen(
        [*command, "--output", str(output)], cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True
    ) as bench:
        _out, stderr = bench.communicate(timeout=280)
    assert bench.returncode == 0, stderr[-3000:]
    rows = json.loads(output.read_text())["rows"]
    if not [r for r in rows if r["available"]]:  # no server could start here (the e2e prerequisites)
        assert all(r["note"].startswith("not available: ") for r in rows), rows
        pytest.skip(rows[0]["note"])
    held = [r for r in rows if r["name"].endswith("runs held")]
    assert [r["name"].split(" via ")[0] for r in held] == ["helix, database manager (PostgreSQL + channels_redis)"] * 2
    assert all(r["available"] and r["value"]["unit"] == "runs" for r in held), held
    assert all("PostgreSQL CPU at" in r["note"] and "redis-server CPU at" in r["note"] for r in held), held
    import psycopg

    with psycopg.connect(url) as connection:
        left = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [f"helix_bench_{bench.pid}"])
        assert left.fetchone() is None, "the bench's database was not dropped"
