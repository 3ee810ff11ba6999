"""Many frames per body part over real HTTP (daphne): a drop inside a part resumes exactly once."""

from __future__ import annotations

import json

import httpx
import pytest

from helix_django.models import Run
from tests.adversarial.conftest import wait_idle
from tests.transport.conftest import agent_settings, chat_url, new_session_id, read_sse, send_body, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]
LONG = " ".join(f"w{n}" for n in range(400))


@pytest.fixture
def bursty_server(daphne_server_factory):
    """A fast reply stored in batches of many chunks (50 ms flush interval, one chunk per word): reads return bursts."""
    return daphne_server_factory(
        helix={**agent_settings(TEXT=LONG, PACE_TPS=2000), "FLUSH_INTERVAL_MS": 50, "COALESCE_DELTAS": False}
    )


def test_drops_inside_multi_frame_parts_resume_after_the_last_frame_seen(bursty_server, users):
    server = bursty_server
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        sid = new_session_id()
        full = read_sse(client, "POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")]))
        assert full.done and full.text == LONG
        count = len([e for e in full.events if e.id])
        for k in (2, count // 2, count - 2):
            sid = new_session_id()
            body = send_body(sid, [user_message("hi")])
            dropped = read_sse(client, "POST", chat_url(server, sid), json=body, stop_after=k)
            assert dropped.status == 200 and not dropped.done
            ids = [int(e.id) for e in dropped.events if e.id]
            assert ids == sorted(set(ids)) and len(ids) == k
            live = read_sse(client, "GET", chat_url(server, sid), headers={"Last-Event-ID": str(dropped.last_id)})
            assert live.status == 200 and live.done
            rest_ids = [int(e.id) for e in live.events if e.id]
            assert rest_ids == sorted(set(rest_ids)) and rest_ids[0] > dropped.last_id
            assert dropped.text + live.text == LONG  # every delta once, in order
            wait_idle(client, server, sid)
            assert Run.objects.get(session_id=sid).status == "completed"
            whole = read_sse(client, "GET", chat_url(server, sid), headers={"Last-Event-ID": str(ids[0])})
            assert whole.status == 200 and whole.done
            # The ended run's replay from the first cursor: the same frames both responses showed, once.
            assert [int(e.id) for e in whole.events if e.id] == ids[1:] + rest_ids
            assert whole.text == LONG[len(dropped.events[0].chunk.get("delta", "")) :]


def test_heartbeats_only_ever_land_between_whole_frames(daphne_server_factory, users):
    settings = {**agent_settings(TEXT=LONG, PACE_TPS=800), "FLUSH_INTERVAL_MS": 120, "HEARTBEAT_SECONDS": 0.01}
    server = daphne_server_factory(helix=settings)
    sid = new_session_id()
    with httpx.Client(headers=users["a"][1], timeout=20) as client:
        with client.stream("POST", chat_url(server, sid), json=send_body(sid, [user_message("hi")])) as response:
            raw = b"".join(response.iter_raw())
    assert raw.endswith(b"\n\n")
    blocks = raw[:-2].split(b"\n\n")
    comments = [b for b in blocks if b.startswith(b":")]
    frames = [b for b in blocks if not b.startswith(b":")]
    assert set(comments) <= {b": stream-open", b": keep-alive"} and b": keep-alive" in comments
    for block in frames:  # a heartbeat inside a frame would leave a comment line in it, or split it
        lines = block.split(b"\n")
        assert all(line.startswith((b"id: ", b"event: ", b"data: ")) for line in lines), block[:200]
    datas = [json.loads(b.split(b"data: ", 1)[1]) for b in frames if not b.endswith(b"data: [DONE]")]
    assert "".join(c.get("delta", "") for c in datas if c["type"] == "text-delta") == LONG
    assert frames[-1].endswith(b"data: [DONE]")
