"""Runs on a real Celery worker (Redis broker): the web process hands off, the worker executes, a redelivery is skipped.

One daphne process (CeleryExecutor, the Redis stream manager, the channels_redis layer) and
one ``celery worker`` subprocess, on the suite's database and the test Redis, with a task
queue of this test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest
from celery import Celery
from httpx_sse import EventSource

from helix_django.models import Run
from tests.conftest import redis_url
from tests.live import REPO_ROOT, database_env

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

REPLY = " ".join(f"word{i}" for i in range(40))
HELIX = {
    "EXECUTOR": "helix_django.runtime.celery_executor.CeleryExecutor",
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": REPLY, "PACE_TPS": 80},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
    "LEASE_SECONDS": 5,
    "LEASE_RENEW_SECONDS": 1,
}


class CeleryWorker:
    """One ``celery -A tests.scale.celery_app worker`` subprocess (solo pool) on ``env``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.log_path = Path(tempfile.gettempdir()) / "helix-tests" / f"celery-{os.getpid()}-{uuid.uuid4().hex[:6]}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "celery", "-A", "tests.scale.celery_app", "worker", "--pool=solo"]
        args += ["--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def log_text(self) -> str:
        """The worker's output so far."""
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 30) -> None:
        """Wait until ``text`` appears in the log (AssertionError with the log tail after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while text not in self.log_text():
            assert time.monotonic() < deadline and self.process.poll() is None, self.log_text()[-3000:]
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGKILL the worker (tests never need its graceful exit)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def celery_site(daphne_server_factory, scale_env):
    """(daphne LiveServer with the CeleryExecutor, the worker, the queue name)."""
    queue = f"helix-tests-{uuid.uuid4().hex[:12]}"
    env = {**scale_env, "HELIX_TEST_CELERY_QUEUE": queue}
    worker_env = {
        **os.environ,
        **database_env(),
        **env,
        "DJANGO_SETTINGS_MODULE": "tests.scale.settings",
        "HELIX_TEST_OVERRIDES": json.dumps(HELIX),
        "PYTHONPATH": str(REPO_ROOT),
    }
    worker = CeleryWorker(worker_env)
    try:
        worker.wait_for_log("ready.", timeout=60)
        server = daphne_server_factory(
            asgi_app="tests.scale.celery_asgi:application", settings_module="tests.scale.settings", helix=HELIX, env=env
        )
        yield server, worker, queue
    finally:
        worker.stop()


def test_a_celery_worker_executes_the_run_and_a_redelivered_task_is_skipped(celery_site, user_headers):
    server, worker, queue = celery_site
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    text, types = [], []
    with httpx.Client(headers={"Authorization": user_headers["Authorization"]}, timeout=60) as client:
        with client.stream("POST", server.url(f"/helix/api/sessions/{sid}/chat"), json=body) as response:
            assert response.status_code == 200, response.read()
            for sse in EventSource(response).iter_sse():
                if sse.data == "[DONE]":
                    break
                if sse.id and sse.data:
                    chunk = json.loads(sse.data)
                    types.append(chunk["type"])
                    text.append(chunk.get("delta", "") if chunk["type"] == "text-delta" else "")
    assert "".join(text) == REPLY, worker.log_text()[-3000:]
    assert types[-1] == "finish"
    run = Run.objects.get(session_id=sid)
    assert run.status == "completed"
    worker.wait_for_log(f"run {run.id} executed on worker:")

    # A second delivery of the same hand-off (a broker redelivery) finds the lease taken and does nothing.
    sender = Celery(broker=redis_url())
    sender.send_task("helix_django.execute_run", args=[run.id, "web:gone", {}], queue=queue)
    worker.wait_for_log(f"run {run.id} is not ours to execute")
    run.refresh_from_db()
    assert run.status == "completed"
