"""Private service processes for scale-out tests: a redis-server or a PostgreSQL a test may restart or kill.

The shared redis-server on :6379 (HELIX_TEST_REDIS_URL) and the shared PostgreSQL are never
restarted by a test; a test that restarts a service, or needs other server settings
(``max_connections``), starts its own on a free loopback port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def free_port() -> int:
    """Return a loopback TCP port that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server subprocess on a free port, AOF on, data in a temporary directory."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="helix-redis-")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart) the server on the same port and data directory; wait until it answers."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                self.dir,
                "--save",
                "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut down gracefully (SIGTERM: the AOF is flushed) and wait for the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def kill(self) -> None:
        """SIGKILL the server (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def cleanup(self) -> None:
        """Stop the server and delete its data."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


PG_BIN = Path("/usr/lib/postgresql")


def _pg_tool(name: str) -> str:
    """Return the path of a PostgreSQL server tool (initdb, pg_ctl) of the newest installed version."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted((p for p in PG_BIN.glob("*/bin") if (p / name).exists()), key=lambda p: int(p.parent.name))
    if not versions:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (scripts/services.sh installs it)")
    return str(versions[-1] / name)


class PostgresServer:
    """A PostgreSQL cluster of a test's own: its own port, data directory and settings (e.g. ``max_connections``).

    Trust authentication on loopback, superuser ``postgres``. As root the server runs as the
    ``postgres`` system user (PostgreSQL refuses to run as root).
    """

    def __init__(self, **settings: str | int) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="helix-pg-")
        os.chmod(self.dir, 0o777)  # noqa: S103 - a private temporary cluster, loopback only
        self.data = os.path.join(self.dir, "data")
        self.settings = {"listen_addresses": "127.0.0.1", "port": self.port, "unix_socket_directories": self.dir}
        self.settings.update(settings)

    def url(self, database: str = "postgres") -> str:
        """``postgres://postgres@127.0.0.1:<port>/<database>``."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        argv = list(args)
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def init(self) -> PostgresServer:
        """Create the cluster (initdb) and start it."""
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._run(_pg_tool("initdb"), "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync")
        return self.start()

    def start(self) -> PostgresServer:
        """Start the server; return once it accepts connections."""
        options = " ".join(f"-c {key}={value}" for key, value in self.settings.items())
        log = os.path.join(self.dir, "server.log")
        self._run(_pg_tool("pg_ctl"), "-D", self.data, "-l", log, "-o", options, "-w", "-t", "60", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnect clients and shut down cleanly; ``immediate``: a crash)."""
        self._run(_pg_tool("pg_ctl"), "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """Stop (fast) and start again on the same port."""
        self.stop()
        self.start()

    def execute(self, sql: str, database: str = "postgres") -> list[tuple]:
        """Run one statement as the superuser; return its rows (``[]`` for none)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def cleanup(self) -> None:
        """Stop the server (immediate) if it runs and delete its files."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
