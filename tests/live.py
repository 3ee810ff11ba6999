"""A real ASGI server (daphne or uvicorn) in a subprocess, for tests that speak HTTP/WebSocket over loopback.

Usage (the live test database must be committed, so use ``transaction=True``). Register the
fixtures in your tests package's ``conftest.py``::

    from tests.live import daphne_server, daphne_server_factory  # noqa: F401

then, in a test module::

    @pytest.mark.django_db(transaction=True)
    def test_send(daphne_server):
        r = httpx.get(daphne_server.url("/helix/api/sessions/"))

    # or build one yourself, with other settings, env or ASGI app:
    def test_restart(daphne_server_factory):
        server = daphne_server_factory(settings_module="tests.settings", helix={"LIVE_WAIT_TIMEOUT_MS": 500})
        server.kill()          # SIGKILL: no cleanup in the server, like a crashed process
        server.start()         # same port, same database
        server.stop()          # SIGTERM, wait for a graceful exit (SIGKILL after the timeout)

:class:`LiveServer` runs ``daphne -b 127.0.0.1 -p PORT <asgi app>`` (``server="daphne"``) or
``uvicorn --host 127.0.0.1 --port PORT --loop uvloop --http httptools --ws websockets-sansio
--lifespan auto --timeout-graceful-shutdown 1 --no-access-log <asgi app>`` (``server="uvicorn"``;
the lifespan is "auto" because ``RecoveryOnStartup`` apps handle it and plain Channels routers
do not; the access log is off because daphne's is off by default). ``server=None`` takes
``HELIX_TEST_SERVER`` (default ``daphne``), so a whole run can be switched:
``HELIX_TEST_SERVER=uvicorn pytest tests/transport``. Both get:

- ``DJANGO_SETTINGS_MODULE`` = ``settings_module`` (default ``tests.settings``);
- ``HELIX_SQLITE_PATH`` = the live test database file (``connection.settings_dict["NAME"]``),
  or, on PostgreSQL, ``HELIX_TEST_DATABASE_URL`` rewritten to the test database's name;
- ``HELIX_TEST_OVERRIDES`` = JSON of ``helix`` over the run's own ``HELIX_TEST_OVERRIDES`` (merged over
  ``HELIX`` by ``tests/settings.py``), so a run switched to another stream manager keeps it in its servers;
- ``PYTHONPATH`` = the repository root, plus every key of ``env``.

``start()`` returns once the server answers an HTTP request (any status), or raises
:class:`LiveServerError` with the tail of the server's log. A port taken by a lingering
socket is retried until the start timeout. The server's stdout/stderr go to a log file
(``log_path``; read it with :meth:`LiveServer.log_text`). ``stop()`` is graceful
(SIGTERM, then SIGKILL after ``timeout`` seconds), ``kill()`` is SIGKILL at once; both
only signal the process this object started. ``restart()`` stops and starts on the same port.

Fixtures: ``daphne_server_factory`` (a callable taking the constructor's keyword arguments;
started, stopped at teardown) and ``daphne_server`` (one default server per test). Both
require the ``transactional_db`` fixture, so data the test writes is visible to the server.
Their names are historical: they start the ``HELIX_TEST_SERVER`` server (daphne unless set).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ASGI_APP = "tests.asgi:application"
SERVERS = ("daphne", "uvicorn")
"""The ASGI servers helix_django is tested on (docs/deploy.md)."""
UVICORN_GRACEFUL_SHUTDOWN_SECONDS = 1
"""How long uvicorn lets open responses finish after SIGTERM before it cancels them (daphne cancels at once)."""


class LiveServerError(RuntimeError):
    """The server did not start (its log tail is in the message)."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def default_server() -> str:
    """Return the server of this test run: ``HELIX_TEST_SERVER`` (``daphne`` or ``uvicorn``), default daphne.

    Raises ValueError for another name (a typo would otherwise test daphne silently).
    """
    name = os.environ.get("HELIX_TEST_SERVER", "").strip() or "daphne"
    if name not in SERVERS:
        raise ValueError(f"HELIX_TEST_SERVER={name!r}: expected one of {', '.join(SERVERS)}")
    return name


def database_env() -> dict[str, str]:
    """Return the env pointing a server process at the live test database of this process."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"HELIX_SQLITE_PATH": str(settings["NAME"])}
    url = os.environ.get("HELIX_TEST_DATABASE_URL", "")
    if url:
        parts = urlsplit(url)
        return {"HELIX_TEST_DATABASE_URL": urlunsplit(parts._replace(path="/" + str(settings["NAME"])))}
    return {}


class LiveServer:
    """One daphne or uvicorn subprocess on a fixed loopback port (see the module docstring)."""

    def __init__(
        self,
        *,
        asgi_app: str = DEFAULT_ASGI_APP,
        settings_module: str = "tests.settings",
        env: dict[str, str] | None = None,
        helix: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        start_timeout: float = 30.0,
        extra_args: list[str] | None = None,
        server: str | None = None,
    ) -> None:
        self.server = server or default_server()
        if self.server not in SERVERS:
            raise ValueError(f"server={self.server!r}: expected one of {', '.join(SERVERS)}")
        self.asgi_app = asgi_app
        self.settings_module = settings_module
        self.env = dict(env or {})
        self.helix = dict(helix or {})
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args or [])
        self.process: subprocess.Popen[bytes] | None = None
        log_dir = Path(tempfile.gettempdir()) / "helix-tests" / "live"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.server}-{os.getpid()}-{self.port}.log"
        self._log_file: Any = None

    # --- addresses ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://host:port`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    @property
    def ws_base_url(self) -> str:
        """``ws://host:port``."""
        return f"ws://{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """Return the absolute URL of ``path`` on this server."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # --- lifecycle ---------------------------------------------------------------------

    def command(self) -> list[str]:
        """Return the server's command line (``extra_args`` go before the app)."""
        if self.server == "uvicorn":
            return [
                str(Path(sys.executable).with_name("uvicorn")),
                *("--host", self.host, "--port", str(self.port)),
                *("--loop", "uvloop", "--http", "httptools", "--ws", "websockets-sansio", "--lifespan", "auto"),
                *("--timeout-graceful-shutdown", str(UVICORN_GRACEFUL_SHUTDOWN_SECONDS), "--no-access-log"),
                *self.extra_args,
                self.asgi_app,
            ]
        daphne = str(Path(sys.executable).with_name("daphne"))
        return [daphne, "-b", self.host, "-p", str(self.port), *self.extra_args, self.asgi_app]

    def environment(self) -> dict[str, str]:
        """Return the server's environment (inherited + database + settings + overrides)."""
        env = dict(os.environ)
        env.update(database_env())
        env["DJANGO_SETTINGS_MODULE"] = self.settings_module
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
        env["PYTHONUNBUFFERED"] = "1"
        if self.helix:
            # Over the run's own overrides (a whole run switched to another stream manager keeps it).
            inherited = json.loads(env.get("HELIX_TEST_OVERRIDES") or "{}")
            env["HELIX_TEST_OVERRIDES"] = json.dumps({**inherited, **self.helix})
        env.update(self.env)
        return env

    @property
    def is_running(self) -> bool:
        """Whether the subprocess is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> LiveServer:
        """Start the server and wait until it answers; raise LiveServerError otherwise."""
        if self.is_running:
            return self
        deadline = time.monotonic() + self.start_timeout
        while True:
            self._spawn()
            if self._wait_ready(deadline):
                return self
            # daphne (Twisted) says "Address already in use", uvicorn "address already in use".
            if time.monotonic() >= deadline or "address already in use" not in self.log_text().lower():
                self.kill()
                raise LiveServerError(f"{self.server} did not start on port {self.port}:\n{self.log_text()[-4000:]}")
            time.sleep(0.2)  # the port is still held by a previous socket; retry

    def _spawn(self) -> None:
        self._close_log()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process's life
        self._log_offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            self.command(),
            cwd=REPO_ROOT,
            env=self.environment(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )

    def _wait_ready(self, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if not self.is_running:
                return False
            try:
                httpx.get(self.url("/__helix_live_ping__"), timeout=1.0)
                return True
            except httpx.TransportError:
                time.sleep(0.05)
        return False

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop gracefully (SIGTERM), SIGKILL after ``timeout`` seconds; return the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self._exit_code()

    def wait_stopped(self, timeout: float) -> int | None:
        """Wait for a server sent SIGTERM elsewhere to exit; return its exit code as :meth:`stop` does."""
        assert self.process is not None
        self.process.wait(timeout)
        return self._exit_code()

    def _exit_code(self) -> int | None:
        assert self.process is not None
        self._close_log()
        if self.server == "uvicorn" and self.process.returncode == -signal.SIGTERM and self._finished_shutdown():
            return 0  # uvicorn re-raises SIGTERM on itself once its graceful shutdown is done
        return self.process.returncode

    def _finished_shutdown(self) -> bool:
        return "Finished server process" in self.log_text()

    def kill(self) -> int | None:
        """Kill the server with SIGKILL at once (a crash: no shutdown code runs)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close_log()
        return self.process.returncode

    def restart(self, *, graceful: bool = True) -> LiveServer:
        """Stop (or kill) and start again on the same port."""
        if graceful:
            self.stop()
        else:
            self.kill()
        return self.start()

    def log_text(self) -> str:
        """Return what the server printed since its last start."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(getattr(self, "_log_offset", 0))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _close_log(self) -> None:
        if self._log_file is not None:
            with contextlib.suppress(OSError):
                self._log_file.close()
            self._log_file = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def daphne_server_factory(transactional_db):
    """Return ``make(**LiveServer kwargs) -> LiveServer`` (started); every server is stopped at teardown."""
    servers: list[LiveServer] = []

    def make(**kwargs: Any) -> LiveServer:
        server = LiveServer(**kwargs)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def daphne_server(daphne_server_factory) -> LiveServer:
    """A server (``HELIX_TEST_SERVER``, default daphne) running ``tests.asgi:application`` on the live test database."""
    return daphne_server_factory()
