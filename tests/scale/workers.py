"""Task worker processes (``manage.py db_worker`` of django-tasks-db) started by scale-out tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.live import REPO_ROOT, database_env


class Worker:
    """One ``db_worker`` subprocess on the live test database, with ``helix`` merged over HELIX."""

    def __init__(
        self,
        helix: dict[str, Any],
        *,
        batch: bool = False,
        env: dict[str, str] | None = None,
        settings_module: str = "tests.settings",
    ) -> None:
        self.helix = helix
        self.batch = batch
        self.env = dict(env or {})
        self.settings_module = settings_module
        self.process: subprocess.Popen[bytes] | None = None
        log_dir = Path(tempfile.gettempdir()) / "helix-tests" / "workers"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"worker-{os.getpid()}-{id(self)}.log"

    def start(self) -> Worker:
        """Start the worker (polls the task table every 50 ms)."""
        env = {
            **os.environ,
            **database_env(),
            "DJANGO_SETTINGS_MODULE": self.settings_module,
            "HELIX_TEST_OVERRIDES": json.dumps(self.helix),
            "PYTHONPATH": str(REPO_ROOT),
            **self.env,
        }
        args = [sys.executable, "-m", "django", "db_worker", "--no-startup-delay", "--interval", "0.05", "-v", "2"]
        if self.batch:
            args.append("--batch")
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(args, env=env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def wait(self, timeout: float = 60) -> int:
        """Wait for the worker to exit; return its exit code."""
        assert self.process is not None
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the worker (a crash: no cleanup, its lease is left to expire)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """Stop the worker if it still runs (SIGKILL: tests never need a graceful worker exit)."""
        self.kill()

    def log_text(self) -> str:
        """The worker's output so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
