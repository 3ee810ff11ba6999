"""Cross-process delivery: a reader on another daphne process vs the local reader of the same run (issue 21).

Two daphne subprocesses (A, B) serve ``bench.asgi`` on the bench SQLite file with the
database stream manager and a channels_redis layer (``HELIX_BENCH_CHANNEL_LAYER_PREFIX``,
a fresh prefix per bench run). Per repeat, a client POSTs a chat message to A (the run
executes on A) and, at the response's first frame, follows the same session over the
WebSocket route on A (the local reader) and on B (the remote reader, woken through the
layer; its consumer also receives on the layer, as every Channels consumer does). Every
delta carries its emission time (:class:`bench.provider.ClockProvider`); a sample is
receive time minus emission time, for every delta emitted after both readers' first
frame. Value: the remote reader's p50/p99; baseline: the local reader's, same run.
Target: the remote p99 within the same order as the local one (ratio < 10x).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from bench.config import Sizes
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.sections.e2e import missing as e2e_missing
from bench.sections.e2e import server_name, token_headers

NAME = "crossprocess"
MAX_RATIO = 10.0


def missing() -> str:
    """Return why two processes cannot be measured here, or '' when they can."""
    import importlib.util

    reason = e2e_missing()
    if reason:
        return reason
    if importlib.util.find_spec("channels_redis") is None:
        return "channels_redis is not installed (pip install -e '.[redis]')"
    import redis
    from django.conf import settings

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return f"no redis-server at {settings.REDIS_URL} (set HELIX_BENCH_REDIS_URL)"
    return ""


def start_servers(helix: dict, prefix: str):
    """Start two daphne servers sharing the bench database and a channels_redis layer under ``prefix``."""
    from django.conf import settings

    from tests.live import LiveServer

    env = {
        "HELIX_BENCH_DIR": settings.BENCH_DIR,
        "HELIX_BENCH_OVERRIDES": json.dumps(helix),
        "HELIX_BENCH_CHANNEL_LAYER_PREFIX": prefix,
    }
    return [
        LiveServer(
            asgi_app="bench.asgi:application", settings_module="bench.settings", env=env, server=server_name()
        ).start()
        for _ in range(2)
    ]


def session_cookie() -> str:
    """Log the bench user in (a Django session); return the ``Cookie`` header the WebSocket route takes."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _created = get_user_model().objects.get_or_create(username="bench")
    browser = Client()
    browser.force_login(user)
    return f"sessionid={browser.cookies['sessionid'].value}"


async def _drain(client, url: str, started: asyncio.Event, **kwargs) -> None:
    from httpx_sse import EventSource

    async with client.stream("POST", url, **kwargs) as response:
        assert response.status_code == 200, response.status_code
        async for event in EventSource(response).aiter_sse():
            started.set()
            if event.data == "[DONE]":
                return
    raise AssertionError("the send ended without [DONE]")


async def _follow_ws(server, session_id: str, cookie: str) -> tuple[float, list[tuple[float, float]]]:
    """Follow the session over the WebSocket route from sequence 0.

    Return ``(first frame time, [(emitted, delay ms)] per delta)`` (times: ``perf_counter``).
    """
    import websockets

    delays: list[tuple[float, float]] = []
    first = 0.0
    url = f"{server.ws_base_url}/ws/helix/api/sessions/{session_id}/"
    async with websockets.connect(url, additional_headers={"Cookie": cookie}, origin=server.base_url) as ws:
        await ws.send(json.dumps({"type": "resume", "from_sequence": 0}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            now = time.perf_counter()
            first = first or now
            if frame["type"] != "chunk":
                assert frame["type"] == "end", frame
                return first, delays
            chunk = frame["chunk"]
            if chunk.get("type") == "text-delta":
                delays.extend((float(token), (now - float(token)) * 1000) for token in chunk["delta"].split())


def _percentiles(delays: list[tuple[float, float]], cutoff: float) -> tuple[float, float]:
    steady = sorted(delay for emitted, delay in delays if emitted > cutoff)
    assert steady, "no delta was emitted after both readers caught up"
    return steady[len(steady) // 2], steady[min(len(steady) - 1, int(0.99 * len(steady)))]


async def _measure(client, a, b, tokens: int, headers, cookie: str):
    """One run on A, followed over WebSockets on A and on B; return ((local p50, p99), (remote p50, p99)) in ms."""
    session_id = f"bench_xp_{uuid.uuid4().hex[:12]}"
    message = {
        "id": f"u_{uuid.uuid4().hex[:8]}",
        "role": "user",
        "parts": [{"type": "text", "text": f"tokens={tokens}"}],
    }
    body = {"id": session_id, "messages": [message], "trigger": "submit-message"}
    started = asyncio.Event()
    url = a.url(f"/helix/api/sessions/{session_id}/chat")
    send = asyncio.ensure_future(_drain(client, url, started, json=body, headers=headers))
    await asyncio.wait_for(started.wait(), 30)
    (local_first, local), (remote_first, remote) = await asyncio.gather(
        _follow_ws(a, session_id, cookie), _follow_ws(b, session_id, cookie)
    )
    await send
    # Steady state: deltas emitted after both readers had their first frame (the replay is not live delivery).
    cutoff = max(local_first, remote_first)
    return _percentiles(local, cutoff), _percentiles(remote, cutoff)


async def run(sizes: Sizes) -> list[Row]:
    """Return the remote reader's p50 and p99 delay rows, each next to the local reader's."""
    reason = missing()
    if reason:
        return [not_available(NAME, "reader on another process", reason)]
    import httpx
    from asgiref.sync import sync_to_async

    pace = sizes.live_tokens_per_second
    tokens = max(20, int(sizes.live_seconds * pace))
    from bench.sections.sse import clock_agent_settings

    helix = clock_agent_settings(tokens, pace)
    headers = await sync_to_async(token_headers)()
    cookie = await sync_to_async(session_cookie)()
    servers = await sync_to_async(start_servers)(helix, f"helix-bench-{uuid.uuid4().hex}")
    a, b = servers
    local: dict[str, list[float]] = {"p50": [], "p99": []}
    remote: dict[str, list[float]] = {"p50": [], "p99": []}
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            for _ in range(sizes.repeats):
                (lp50, lp99), (rp50, rp99) = await _measure(client, a, b, tokens, headers, cookie)
                local["p50"].append(lp50)
                local["p99"].append(lp99)
                remote["p50"].append(rp50)
                remote["p99"].append(rp99)
    except (httpx.HTTPError, AssertionError) as exc:
        return [not_available(NAME, "reader on another process", f"failed: {exc!r}"[:300])]
    finally:
        for server in servers:
            await sync_to_async(server.stop)()
    name = f"database/sqlite + channels_redis, 1 run x {pace:.0f} tok/s, reader on process B"
    rows = []
    for key in ("p50", "p99"):
        ratio = paired_ratio(remote[key], local[key])
        target = {"target": f"< {MAX_RATIO:.0f}x local", "holds": ratio.median < MAX_RATIO} if key == "p99" else {}
        rows.append(
            Row(
                NAME,
                f"{name}: delay {key}",
                value=Stat.of(remote[key], "ms"),
                baseline_name="local reader (process A), same run",
                baseline=Stat.of(local[key], "ms"),
                ratio=ratio,
                **target,
            )
        )
    return rows
