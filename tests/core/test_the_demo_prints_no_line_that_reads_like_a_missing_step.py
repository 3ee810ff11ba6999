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
    """Return the process's merged output up to the line holding ``needle`` (AssertionError after ``seconds``).

    Reads the pipe's file descriptor with ``os.read``: a buffered ``readline`` after a select
    can pull two lines into Python's buffer and return one, and the select never wakes for the
    second when the server falls quiet after it.
    """
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(descriptor, selectors.EVENT_READ)
    received = b""
    deadline = time.monotonic() + seconds
    while needle.encode() not in received:
        left = deadline - time.monotonic()
        output = received.decode(errors="replace")
        assert left > 0 and process.poll() is None, f"no {needle!r} in:\n{output}"
        if selector.select(timeout=min(left, 1.0)):
            received += os.read(descriptor, 65536)
    return received.decode(errors="replace")


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
