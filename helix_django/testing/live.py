"""A real ASGI server (daphne or uvicorn) in a subprocess, serving the host's app on a free loopback port.

::

    server = LiveServer(asgi_app="mysite.asgi:application", helix={"LIVE_WAIT_TIMEOUT_MS": 500})
    server.start()         # returns once the server answers HTTP (any status)
    httpx.get(server.url("/helix/api/sessions/"))
    server.kill()          # SIGKILL: no cleanup in the server, like a crashed process
    server.start()         # same port, same database
    server.stop()          # SIGTERM, then SIGKILL after the timeout

``server="daphne"`` runs ``daphne -b HOST -p PORT APP``; ``server="uvicorn"`` runs ``uvicorn
--host HOST --port PORT --loop uvloop --http httptools --ws websockets-sansio --lifespan auto
--timeout-graceful-shutdown 1 --no-access-log APP`` (the lifespan is "auto" because
``RecoveryOnStartup`` apps handle it and plain Channels routers do not). ``server=None`` takes
``HELIX_TEST_SERVER`` (default ``daphne``), so a whole run can be switched.

By default the process serves :mod:`helix_django.testing.asgi`, which points each database
alias at the test database of this process (same engine, host and port) and merges ``helix``
over the server's ``HELIX`` before it imports ``asgi_app``: the host's settings need nothing
for tests. A project whose settings take their database and overrides from the environment
overrides :meth:`LiveServer.database_env` and :meth:`LiveServer.helix_env` and sets
``wrap_app = False``.

The test database must be committed for the server to see what the test wrote: use
``transaction=True`` (the ``helix_server`` fixtures require ``transactional_db``). The
server's stdout/stderr go to :attr:`LiveServer.log_path` (read with :meth:`LiveServer.log_text`).
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
from typing import IO, Any

import httpx
from django.conf import settings
from django.db import connections

SERVERS = ("daphne", "uvicorn")
"""The ASGI servers helix_django is tested on (docs/deploy.md)."""
UVICORN_GRACEFUL_SHUTDOWN_SECONDS = 1
"""How long uvicorn lets open responses finish after SIGTERM before it cancels them (daphne cancels at once)."""
WRAPPER_APP = "helix_django.testing.asgi:application"


class LiveServerError(RuntimeError):
    """The server did not start (its log tail is in the message)."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def default_server() -> str:
    """Return the server of this test run: ``HELIX_TEST_SERVER`` (``daphne`` or ``uvicorn``), default daphne.

    Raises ValueError for another name (a typo would otherwise test daphne silently).
    """
    name = os.environ.get("HELIX_TEST_SERVER", "").strip() or "daphne"
    if name not in SERVERS:
        raise ValueError(f"HELIX_TEST_SERVER={name!r}: expected one of {', '.join(SERVERS)}")
    return name


def default_asgi_app() -> str:
    """Return ``settings.ASGI_APPLICATION`` as ``module:attribute`` (``site.asgi.app`` -> ``site.asgi:app``).

    Raises LiveServerError when the setting is missing (pass ``asgi_app`` then).
    """
    dotted = getattr(settings, "ASGI_APPLICATION", None)
    if not dotted:
        raise LiveServerError("settings.ASGI_APPLICATION is not set: pass asgi_app='module:attribute'")
    module, _, attribute = str(dotted).rpartition(".")
    return f"{module}:{attribute}"


def database_names() -> dict[str, dict[str, str]]:
    """Return ``{alias: {"ENGINE", "HOST", "PORT", "NAME"}}`` of this process's databases (test names once set up).

    Raises LiveServerError for an in-memory SQLite database, which no other process can open
    (set ``DATABASES[alias]["TEST"]["NAME"]`` to a file).
    """
    out = {}
    for alias in connections:
        conf = connections[alias].settings_dict
        entry = {key: str(conf.get(key) or "") for key in ("ENGINE", "HOST", "PORT", "NAME")}
        in_memory = "mode=memory" in entry["NAME"] or entry["NAME"] in ("", ":memory:")
        if connections[alias].vendor == "sqlite" and in_memory:
            raise LiveServerError(
                f"database {alias!r} is an in-memory SQLite database, which a server process cannot open: "
                f"set DATABASES[{alias!r}]['TEST']['NAME'] to a file"
            )
        out[alias] = entry
    return out


class LiveServer:
    """One daphne or uvicorn subprocess on a fixed loopback port (see the module docstring).

    ``asgi_app`` is ``module:attribute`` (default: ``settings.ASGI_APPLICATION``);
    ``settings_module`` defaults to this process's; ``cwd`` (default: the working directory)
    is the process's directory and goes first on its ``PYTHONPATH``; ``env`` is applied last.
    """

    wrap_app = True
    """Serve through :mod:`helix_django.testing.asgi` (test databases and ``helix`` applied there)."""

    def __init__(
        self,
        *,
        asgi_app: str | None = None,
        settings_module: str | None = None,
        env: dict[str, str] | None = None,
        helix: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        start_timeout: float = 30.0,
        extra_args: list[str] | None = None,
        server: str | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.server = server or default_server()
        if self.server not in SERVERS:
            raise ValueError(f"server={self.server!r}: expected one of {', '.join(SERVERS)}")
        self.asgi_app = asgi_app or default_asgi_app()
        self.settings_module = settings_module or _settings_module()
        self.env = dict(env or {})
        self.helix = dict(helix or {})
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout = start_timeout
        self.extra_args = list(extra_args or [])
        self.cwd = Path(cwd) if cwd is not None else Path.cwd()
        self.process: subprocess.Popen[bytes] | None = None
        log_dir = Path(tempfile.gettempdir()) / "helix-tests" / "live"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.server}-{os.getpid()}-{self.port}.log"
        self._log_file: IO[bytes] | None = None
        self._log_offset = 0

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

    # --- process -----------------------------------------------------------------------

    def command(self) -> list[str]:
        """Return the server's command line (``extra_args`` go before the app)."""
        app = WRAPPER_APP if self.wrap_app else self.asgi_app
        if self.server == "uvicorn":
            return [
                str(Path(sys.executable).with_name("uvicorn")),
                *("--host", self.host, "--port", str(self.port)),
                *("--loop", "uvloop", "--http", "httptools", "--ws", "websockets-sansio", "--lifespan", "auto"),
                *("--timeout-graceful-shutdown", str(UVICORN_GRACEFUL_SHUTDOWN_SECONDS), "--no-access-log"),
                *self.extra_args,
                app,
            ]
        daphne = str(Path(sys.executable).with_name("daphne"))
        return [daphne, "-b", self.host, "-p", str(self.port), *self.extra_args, app]

    def database_env(self) -> dict[str, str]:
        """Return the env pointing the server at this process's test databases (read by the wrapper app)."""
        return {"HELIX_TESTING_DATABASES": json.dumps(database_names())}

    def helix_env(self) -> dict[str, str]:
        """Return the env carrying ``helix`` (merged over the server's ``HELIX`` by the wrapper app)."""
        return {"HELIX_TESTING_HELIX": json.dumps(self.helix)} if self.helix else {}

    def environment(self) -> dict[str, str]:
        """Return the server's environment: inherited, database, settings, ``helix``, then ``env``."""
        env = dict(os.environ)
        env.update(self.database_env())
        env["DJANGO_SETTINGS_MODULE"] = self.settings_module
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.cwd), env.get("PYTHONPATH", "")]))
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.helix_env())
        if self.wrap_app:
            env["HELIX_TESTING_APP"] = self.asgi_app
        env.update(self.env)
        return env

    @property
    def is_running(self) -> bool:
        """Whether the subprocess is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> LiveServer:
        """Start the server and wait until it answers HTTP; raise LiveServerError otherwise.

        A port still held by a lingering socket is retried until ``start_timeout`` (seconds).
        """
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
            time.sleep(0.2)

    def _spawn(self) -> None:
        self._close_log()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process's life
        self._log_offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            self.command(),
            cwd=self.cwd,
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
        """Stop gracefully (SIGTERM), SIGKILL after ``timeout`` s; return the exit code (None: never started)."""
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
        """Kill the server with SIGKILL at once (a crash: no shutdown code runs); return the exit code."""
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
                fh.seek(self._log_offset)
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


def _settings_module() -> str:
    return str(getattr(settings, "SETTINGS_MODULE", None) or os.environ.get("DJANGO_SETTINGS_MODULE", ""))
