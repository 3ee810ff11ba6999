"""Section 3: end to end through the server's SSE chat route (daphne or ``HELIX_BENCH_SERVER``).

A daphne subprocess serves ``bench.asgi`` on loopback with the bench SQLite file; the
default agent is the scripted provider at pace 0 with an ``e2e_chunks``-token reply.
Per repeat, ``SENDS`` chat POSTs (each a new session, DRF token auth) are read as SSE
with httpx: time to first byte (the first chunk frame) and provider deltas/s delivered to ``[DONE]``;
then one more message in each of those sessions (the next turn of a conversation, its
body carrying the first turn as the AI SDK client's does). Baselines in the same repeat:
the HTTP floor (a POST of the same kind of body and headers to a bare ASGI route that
reads it, on the same server and client) for the time to first byte, the provider
alone for throughput. A second floor: the same POST to the site's own authenticated endpoint
(``/bench/authenticated/ping``, :mod:`bench.views`: Django's handler, the site's middleware
and the same token authentication, answering ``ok``), what any authenticated endpoint of the
site takes.
Targets (medians over repeats): time to first byte added by persistence and transport
(chat TTFB - bare floor) < 5 ms; time to first byte added over the site's own authenticated
POST (chat TTFB - that view's TTFB) <= 1 ms. The added TTFB as a multiple of the bare POST's
is informational.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import time
import uuid

from bench.config import Sizes
from bench.harness import Row, Stat, not_available, paired_ratio
from bench.sections.runtime import helix_setting, provider_alone, reply_text

NAME = "e2e"
SENDS = 20  # per repeat: the median of 20 sends (5 moved by a millisecond between runs)
PINGS = 20
TARGET_ADDED_MS = 5.0
TARGET_ADDED_OVER_HOST_MS = 1.0
"""Time to first byte added over the site's own authenticated POST, ms (median)."""
HOST_PING = "/bench/authenticated/ping"
"""The site's own authenticated endpoint (:mod:`bench.views`): the second floor."""
WARM_UP_TIMEOUT_SECONDS = 20


def missing() -> str:
    """Return why the chat route cannot be measured, or '' when it can."""
    from bench.sections.runtime import missing as runtime_missing

    reason = runtime_missing()
    if reason:
        return reason
    for module in ("helix_django.transport.routing", "helix_django.transport.chat", "tests.live"):
        if importlib.util.find_spec(module) is None:
            return f"{module} has not landed"
    for module in ("httpx", "httpx_sse", server_name()):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[test]')"
    return ""


def token_headers() -> dict[str, str]:
    """Create a bench user with a DRF token; return the Authorization header."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user, _created = get_user_model().objects.get_or_create(username="bench")
    token, _created = Token.objects.get_or_create(user=user)
    return {"Authorization": f"Token {token.key}"}


def server_name() -> str:
    """The ASGI server the HTTP sections start: ``HELIX_BENCH_SERVER`` (default daphne)."""
    return os.environ.get("HELIX_BENCH_SERVER") or "daphne"


def start_server(helix: dict):
    """Start daphne on ``bench.asgi`` with ``helix`` merged over HELIX; return the LiveServer."""
    from django.conf import settings

    from tests.live import LiveServer

    env = {"HELIX_BENCH_DIR": settings.BENCH_DIR, "HELIX_BENCH_OVERRIDES": json.dumps(helix)}
    server = LiveServer(
        asgi_app="bench.asgi:application", settings_module="bench.settings", env=env, server=server_name()
    )
    return server.start()


@dataclasses.dataclass
class Sent:
    """One chat POST read to ``[DONE]``."""

    ttfb_ms: float
    """Time to the first chunk frame."""
    seconds: float
    """Time to ``[DONE]``."""
    frames: int
    session_id: str
    conversation: list[dict]
    """The messages a client holds afterwards (what its next send carries): history, user, answer."""


def user_message() -> dict:
    """Return a new one-line user message (a UIMessage)."""
    return {"id": f"u_{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": "bench"}]}


async def send(client, server, headers: dict[str, str], previous: Sent | None = None) -> Sent:
    """POST one chat message and read the SSE body to ``[DONE]``.

    Without ``previous`` the message starts a new session (created by the send); with it,
    the body carries the whole conversation so far, as the AI SDK's ``DefaultChatTransport`` does.
    """
    from httpx_sse import EventSource

    session_id = previous.session_id if previous else f"bench_e2e_{uuid.uuid4().hex[:12]}"
    messages = [*(previous.conversation if previous else []), user_message()]
    body = {"id": session_id, "messages": messages, "trigger": "submit-message"}
    url = server.url(f"/helix/api/sessions/{session_id}/chat")
    started = time.perf_counter()
    first, frames, done, answer_id, text = 0.0, 0, False, "", []
    async with client.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, response.status_code
        async for event in EventSource(response).aiter_sse():
            if event.data == "[DONE]":
                done = True
                break
            if event.id:
                frames += 1
                if frames == 1:
                    first = (time.perf_counter() - started) * 1000
                chunk = json.loads(event.data)
                if chunk["type"] == "start":
                    answer_id = chunk["messageId"]
                elif chunk["type"] == "text-delta":
                    text.append(chunk["delta"])
    seconds = time.perf_counter() - started
    assert done, "the SSE body ended without [DONE]"
    answer = {"id": answer_id, "role": "assistant", "parts": [{"type": "text", "text": "".join(text), "state": "done"}]}
    return Sent(first, seconds, frames, session_id, [*messages, answer])


async def ping(client, server, headers: dict[str, str], path: str = "/bench/ping") -> float:
    """POST a new session's chat body to a ping route (read, not handled); return ms to the first body byte.

    ``path``: the bare ping, or the site's own authenticated one (``/bench/authenticated/ping``).
    """
    body = {"id": f"bench_e2e_{uuid.uuid4().hex[:12]}", "messages": [user_message()], "trigger": "submit-message"}
    started = time.perf_counter()
    async with client.stream("POST", server.url(path), json=body, headers=headers) as response:
        assert response.status_code == 200, response.status_code
        async for _part in response.aiter_bytes():
            break
    return (time.perf_counter() - started) * 1000


async def run(sizes: Sizes) -> list[Row]:
    """Return time-to-first-byte and throughput rows through daphne."""
    reason = missing()
    if reason:
        return [not_available(NAME, "chat route through daphne (SSE)", reason)]
    import httpx
    from asgiref.sync import sync_to_async

    options = {"TEXT": reply_text(sizes.e2e_chunks), "PACE_TPS": 0}
    headers = await sync_to_async(token_headers)()
    server = await sync_to_async(start_server)(helix_setting(options))
    ttfb, follow_up, floor, host_floor, rates, provider_rates, overheads, frames_per_delta = ([] for _ in range(8))
    try:
        async with httpx.AsyncClient(timeout=WARM_UP_TIMEOUT_SECONDS) as client:
            try:
                await send(client, server, headers)  # warm-up: imports and connections in the server
            except (httpx.HTTPError, AssertionError) as exc:
                return [
                    not_available(NAME, "chat route through daphne (SSE)", f"the chat route did not stream ({exc!r})")
                ]
            for _ in range(sizes.repeats):
                floor.append(statistics.median([await ping(client, server, headers) for _ in range(PINGS)]))
                host_pings = [await ping(client, server, headers, HOST_PING) for _ in range(PINGS)]
                host_floor.append(statistics.median(host_pings))
                sends = [await send(client, server, headers) for _ in range(SENDS)]
                # The common case: the next message of a conversation (its session exists).
                follow_up.append(statistics.median([(await send(client, server, headers, s)).ttfb_ms for s in sends]))
                provider_seconds, deltas = await provider_alone(options)
                ttfb.append(statistics.median(s.ttfb_ms for s in sends))
                seconds = statistics.median(s.seconds for s in sends)
                frames = statistics.median(s.frames for s in sends)
                rates.append(deltas / seconds)
                frames_per_delta.append(frames / deltas)
                provider_rates.append(deltas / provider_seconds)
                overheads.append((seconds - provider_seconds) / deltas * 1e6)
    finally:
        server.stop()
    added = Stat.of([t - f for t, f in zip(ttfb, floor, strict=True)], "ms")
    added_ratio = paired_ratio([t - f for t, f in zip(ttfb, floor, strict=True)], floor)
    beyond_host = [t - h for t, h in zip(ttfb, host_floor, strict=True)]
    added_follow_up = Stat.of([t - f for t, f in zip(follow_up, floor, strict=True)], "ms")
    name = f"{sizes.e2e_chunks:,}-token reply"
    return [
        Row(
            NAME,
            "chat POST: time to first chunk frame",
            value=Stat.of(ttfb, "ms"),
            baseline_name="bare ASGI ping (POST, same body)",
            baseline=Stat.of(floor, "ms"),
            ratio=paired_ratio(ttfb, floor),
        ),
        Row(
            NAME,
            "chat POST: TTFB added by persistence + transport",
            value=added,
            target=f"< {TARGET_ADDED_MS:.0f} ms",
            holds=added.median < TARGET_ADDED_MS,
            note="new session per send: chat TTFB minus the HTTP floor of the same server and client",
        ),
        Row(
            NAME,
            "chat POST: TTFB added, as a multiple of the bare POST's TTFB",
            value=added,
            baseline_name="bare ASGI ping (POST, same body)",
            baseline=Stat.of(floor, "ms"),
            ratio=added_ratio,
            note="informational: what helix adds to the first byte, next to what the server and client take alone",
        ),
        Row(
            NAME,
            "chat POST: TTFB added over the site's own authenticated POST",
            value=Stat.of(beyond_host, "ms"),
            baseline_name="site's authenticated DRF view (POST)",
            baseline=Stat.of(host_floor, "ms"),
            ratio=paired_ratio(beyond_host, host_floor),
            target=f"<= {TARGET_ADDED_OVER_HOST_MS:g} ms added",
            holds=statistics.median(beyond_host) <= TARGET_ADDED_OVER_HOST_MS,
            note="chat TTFB minus the TTFB of the site's own view with its middleware and token auth (bench/views.py)",
        ),
        Row(
            NAME,
            "chat POST, next message of a session: TTFB added",
            value=added_follow_up,
            note="the second turn of each of those sessions (the body carries the first turn), minus the same floor",
        ),
        Row(
            NAME,
            f"{name}: deltas/s delivered over SSE to [DONE]",
            value=Stat.of(rates, "deltas/s"),
            baseline_name="provider alone, deltas/s",
            baseline=Stat.of(provider_rates, "deltas/s"),
            ratio=paired_ratio(rates, provider_rates),
            note=f"SSE chunk frames per provider delta: {statistics.median(frames_per_delta):.2f} (coalescing)",
        ),
        Row(
            NAME,
            f"{name}: overhead per delta over the provider alone",
            value=Stat.of(overheads, "us"),
            note=f"{server_name()}, auth, run-start commit, executor, stream manager, SSE framing, httpx parsing",
        ),
    ]
