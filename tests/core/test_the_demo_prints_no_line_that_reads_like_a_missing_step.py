"""``make demo``'s output (scripts/demo.sh) has no line that reads like a missing step.

daphne announces "HTTP/2 support not enabled (install the http2 and tls Twisted extras)" at
start-up. The demo serves plain HTTP on loopback, where browsers never speak HTTP/2 (they
use it over TLS only), so nothing is missing: the example site's logging drops that line,
and every other line of daphne's (its endpoint, its access log) stays.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_django.testing.live import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]


def read_until(process: subprocess.Popen, needle: str, seconds: float) -> str:
    """Return the process's merged output up to the line holding ``needle`` (AssertionError after ``seconds``)."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    output = ""
    deadline = time.monotonic() + seconds
    while needle not in output:
        left = deadline - time.monotonic()
        assert left > 0 and process.poll() is None, f"no {needle!r} in:\n{output}"
        if selector.select(timeout=min(left, 1.0)):
            line = process.stdout.readline()
            output += line
    return output


def test_the_demo_starts_without_the_http2_notice(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "PORT": str(port),
        "HELIX_SQLITE_PATH": str(tmp_path / "example.sqlite3"),
        "HELIX_CACHE_DIR": str(tmp_path / "cache"),
    }
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DJANGO_SETTINGS_MODULE", "HELIX_LOG_LEVEL"):
        env.pop(name, None)
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output = read_until(
            process, f"Listening on TCP address 127.0.0.1:{port}", 300
        )  # set-up and migrations on a loaded CI machine
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    assert f"Open http://127.0.0.1:{port}/ and sign in." in output
    assert "Configuring endpoint" in output  # daphne's own start-up lines are still printed
    assert "HTTP/2" not in output, output
