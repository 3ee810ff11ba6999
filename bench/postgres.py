"""A PostgreSQL database of the bench's own, for the capacity section's servers, and its server's CPU.

``HELIX_BENCH_DATABASE_URL`` names the PostgreSQL server (a role that may create databases).
:class:`BenchDatabase` creates ``helix_bench_<pid>`` on it, migrates it and gives the bench
user its DRF token there (``python -m bench.postgres prepare KEY`` in a subprocess whose
``HELIX_BENCH_DEFAULT_DATABASE_URL`` makes it the default database, as the servers'), and
drops it at the end. :func:`cpu_seconds` reads the server's CPU from ``/proc``: the backends
of that one database, and the server's background processes (postmaster, WAL writer,
checkpointer, ...), which other databases on the same server share.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

from bench.sections.sse import _proc_cpu_seconds

URL_VARIABLE = "HELIX_BENCH_DATABASE_URL"
DEFAULT_VARIABLE = "HELIX_BENCH_DEFAULT_DATABASE_URL"
"""Read by bench/settings.py: the default database (helix's tables) of a process is this PostgreSQL database."""


def server_url() -> str:
    """The PostgreSQL server's URL (``HELIX_BENCH_DATABASE_URL``), '' when unset or not PostgreSQL."""
    url = os.environ.get(URL_VARIABLE, "")
    return url if url.startswith(("postgres://", "postgresql://")) else ""


def missing() -> str:
    """Why the PostgreSQL rows cannot run here ('' when they can)."""
    url = server_url()
    if not url:
        return f"no PostgreSQL (set {URL_VARIABLE} to a server where the role may create databases)"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except ImportError:
        return "no PostgreSQL driver (pip install -e '.[postgres]')"
    except Exception as error:
        return f"no PostgreSQL at {urlsplit(url).hostname}:{urlsplit(url).port}: {type(error).__name__}"
    return ""


class BenchDatabase:
    """``helix_bench_<pid>`` on the server of ``HELIX_BENCH_DATABASE_URL``: create, prepare, drop."""

    def __init__(self) -> None:
        self.admin = server_url()
        self.name = f"helix_bench_{os.getpid()}"
        self.url = urlunsplit(urlsplit(self.admin)._replace(path=f"/{self.name}"))

    def _execute(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True, connect_timeout=5) as connection:
            connection.execute(statement)

    def create(self, token_key: str) -> BenchDatabase:
        """Create the database (dropping a stale one of the same name), migrate it, add the bench user's token."""
        self.drop()
        self._execute(f'CREATE DATABASE "{self.name}"')
        from django.conf import settings

        env = {**os.environ, DEFAULT_VARIABLE: self.url, "HELIX_BENCH_DIR": settings.BENCH_DIR}
        env["DJANGO_SETTINGS_MODULE"] = "bench.settings"
        env.pop(URL_VARIABLE, None)  # the subprocess migrates this one database only
        done = subprocess.run(
            [sys.executable, "-m", "bench.postgres", "prepare", token_key],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            self.drop()
            raise RuntimeError(f"preparing {self.name} failed: {done.stderr[-2000:]}")
        return self

    def drop(self) -> None:
        """Drop the database (its connections closed first); nothing when it does not exist."""
        self._execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def _postgres_processes() -> list[tuple[int, int, str]]:
    """``(pid, ppid, title)`` of every ``postgres`` process this user can read."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                if handle.read().strip() != "postgres":
                    continue
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                title = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        found.append((int(entry), ppid, title))
    return found


def cpu_snapshot(database: str) -> dict[int, tuple[str, float]]:
    """``{pid: (kind, CPU seconds)}`` of the PostgreSQL server's processes, kind ``ours``/``background``.

    ``ours``: a backend (or autovacuum worker) of ``database``; ``background``: the postmaster
    and its processes that serve no one database (WAL writer, checkpointer, ...). Backends of
    other databases are left out.
    """
    out: dict[int, tuple[str, float]] = {}
    words = f" {database} "
    for pid, _ppid, title in _postgres_processes():
        if words in f" {title} ":
            kind = "ours"
        elif "(" in title or "[local]" in title or "autovacuum worker" in title:
            continue  # another database's backend
        else:
            kind = "background"
        try:
            out[pid] = (kind, _proc_cpu_seconds(pid))
        except OSError:
            continue
    return out


def cpu_seconds(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> tuple[float, float]:
    """CPU seconds spent between two snapshots: (this database's backends, the background processes).

    A process that started in between counts from zero; one that ended in between is lost
    (the pools keep their backends open through a step).
    """
    spent = {"ours": 0.0, "background": 0.0}
    for pid, (kind, seconds) in after.items():
        spent[kind] += seconds - before.get(pid, (kind, 0.0))[1]
    return spent["ours"], spent["background"]


def _prepare(token_key: str) -> None:
    """Migrate the default database and give the ``bench`` user the DRF token ``token_key``."""
    import django
    from django.core.management import call_command

    django.setup()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0, interactive=False)
    user, _created = get_user_model().objects.get_or_create(username="bench")
    Token.objects.update_or_create(user=user, defaults={"key": token_key})


if __name__ == "__main__":
    if sys.argv[1:2] == ["prepare"] and len(sys.argv) == 3:
        _prepare(sys.argv[2])
    else:
        sys.exit("usage: python -m bench.postgres prepare TOKEN_KEY")
