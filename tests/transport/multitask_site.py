"""What the multitask tests share: a live server per stream manager, a client that waits runs out, a live answer.

A message sent while an answer streams (``reject``, ``interrupt``, ``enqueue``) is tried
over a real daphne server on each stream manager; each test leaves no run going for the next.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx

from helix_django.models import LIVE_STATUSES, Run
from tests.streams.conftest import BACKENDS, redis_options
from tests.transport.conftest import REPLY, agent_settings, chat_url, read_sse, send_body


def multitask_server(backend_name: str, *, pace_tps: int, agent: str, strategy: str) -> Any:
    """Start a LiveServer on stream manager ``backend_name``: the default agent rejects, ``agent`` uses ``strategy``.

    Replies :data:`~tests.transport.conftest.REPLY` at ``pace_tps`` words/s. The caller stops it.
    """
    from tests.live import LiveServer

    backend = dict(BACKENDS[backend_name])
    if backend_name == "redis":
        backend["OPTIONS"] = redis_options()
    helix = {**agent_settings(TEXT=REPLY, PACE_TPS=pace_tps), "STREAM_MANAGERS": {"default": backend}}
    helix["AGENTS"][agent] = {**helix["AGENTS"]["default"], "MULTITASK": strategy}
    live = LiveServer(helix=helix)
    live.start()
    return live


def settled_client(headers: dict[str, str]) -> Iterator[httpx.Client]:
    """Yield a client with ``headers``; after it, wait (up to 10 s) until no run is live (no race with the flush)."""
    with httpx.Client(headers=headers, timeout=10) as client:
        yield client
    for _ in range(500):
        if not Run.objects.filter(status__in=LIVE_STATUSES).exists():
            return
        time.sleep(0.02)


def start_answer(client: httpx.Client, server: Any, sid: str, first: dict[str, Any]) -> Run:
    """Send ``first`` and leave its answer streaming (two events read); return its run."""
    started = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [first]), stop_after=2)
    assert started.status == 200
    return Run.objects.get(session_id=sid)
