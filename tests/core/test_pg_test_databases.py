"""No PostgreSQL test database is left behind (issue 19; tests/pgdb.py): stale ones dropped, stray sessions ended."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from django.db import connection

from tests.pgdb import drop_stale_databases, end_other_connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL pass only (HELIX_TEST_DATABASE_URL)")


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def server_cursor():
    return connection._nodb_cursor()


def names() -> set[str]:
    with server_cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database")
        return {row[0] for row in cursor.fetchall()}


def dsn(name: str) -> str:
    settings = connection.settings_dict
    return (
        f"host={settings['HOST'] or '127.0.0.1'} port={settings['PORT'] or 5432} dbname={name} "
        f"user={settings['USER']} password={settings['PASSWORD']}"
    )


def test_a_killed_runs_database_is_dropped_and_a_live_ones_kept():
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stale, kept = f"test_helix_{dead_pid()}", f"test_helix_{live.pid}"
    try:
        with server_cursor() as cursor:
            for name in (stale, kept):
                cursor.execute(f'CREATE DATABASE "{name}"')
            dropped = drop_stale_databases(cursor)
        assert stale in dropped and kept not in dropped
        assert stale not in names() and kept in names()
    finally:
        live.kill()
        live.wait()
        with server_cursor() as cursor:
            for name in (stale, kept):
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_a_database_someone_is_connected_to_is_kept_until_its_sessions_are_ended():
    name = f"test_helix_{dead_pid()}"
    with server_cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    stray = psycopg.connect(dsn(name), autocommit=True)  # a server process of a test, still connected
    try:
        with server_cursor() as cursor:
            assert name not in drop_stale_databases(cursor)
            assert end_other_connections(cursor, name) == 1
            cursor.execute(f'DROP DATABASE "{name}"')  # what Django's teardown does: it no longer fails
        assert name not in names()
        with pytest.raises(psycopg.OperationalError):
            stray.execute("SELECT 1")
    finally:
        stray.close()
        with server_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
