"""Live delivery on every process: a reader on a second daphne process follows a run as fast as a local one.

Two real daphne processes share the database, Redis and (per case) the channel layer; the
run executes in process A (the embedded executor). A WebSocket reader on A and one on B
follow the same run; every delta reaches both exactly once, in order, and B's readers are
woken by the cross-process path, never by ResumableReader's 30 s fail-safe.
The lag figures themselves are a benchmark row (``python -m bench --crossprocess``).
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from httpx_sse import EventSource

from tests.scale.delivery import PREFIX, follow, lag_figures

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

WORDS = 50
PACE_TPS = 25
HELIX = {
    "AGENTS": {
        "default": {
            "PROVIDER": {
                "BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider",
                "OPTIONS": {"TEXT": " ".join(f"w{i}" for i in range(WORDS)), "PACE_TPS": PACE_TPS},
            },
            "MODEL": "scripted-1",
            "SYSTEM_PROMPT": "You are a test.",
            "TOOLS": [],
        }
    },
}
# Far below the reader's fail-safe period (30 s) and far above a loaded 2-core machine's jitter.
MAX_REMOTE_LAG_SECONDS = 3.0

CASES = {
    # The combinations docs/scale-out.md offers for several processes.
    "database-manager+channels_redis": {"HELIX_TEST_LAYER": "redis"},
    "redis-manager+channels_redis": {"HELIX_TEST_LAYER": "redis", "STREAM": "redis"},
    "redis-manager+in-memory-layer": {"HELIX_TEST_LAYER": "memory", "STREAM": "redis"},
}


def first_chunk(client: httpx.Client, url: str, body: dict) -> int:
    """POST a send; return the sequence of its first chunk frame (the response is then dropped)."""
    with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        for sse in EventSource(response).iter_sse():
            if sse.id:
                return int(sse.id)
    raise AssertionError("the send streamed no chunk")


@pytest.mark.parametrize("case", list(CASES))
async def test_a_reader_on_another_process_follows_a_run_as_fast_as_a_local_one(
    case, daphne_server_factory, scale_env, user_headers
):
    env = {**scale_env, "HELIX_TEST_LAYER": CASES[case]["HELIX_TEST_LAYER"]}
    if CASES[case].get("STREAM") != "redis":
        env.pop("HELIX_TEST_STREAM_PREFIX")
    kwargs = {"settings_module": "tests.scale.settings", "helix": HELIX, "env": env}
    a, b = daphne_server_factory(**kwargs), daphne_server_factory(**kwargs)
    sid = f"chat_{uuid.uuid4().hex[:16]}"
    message = {"id": f"u_{uuid.uuid4().hex[:10]}", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": sid, "messages": [message], "trigger": "submit-message"}
    with httpx.Client(headers={"Authorization": user_headers["Authorization"]}, timeout=30) as client:
        start = await asyncio.to_thread(first_chunk, client, a.url(f"{PREFIX}/sessions/{sid}/chat"), body)

    cookie = user_headers["Cookie"]
    local, remote = await asyncio.gather(
        follow(a.ws_base_url, a.base_url, sid, cookie, start),
        follow(b.ws_base_url, b.base_url, sid, cookie, start),
    )

    assert sorted(remote) == sorted(local)
    assert len(local) > WORDS // 2  # the run was still streaming deltas when both readers joined
    figures = lag_figures(local, remote)
    assert figures["max"] < MAX_REMOTE_LAG_SECONDS, (figures, b.log_text()[-2000:])
