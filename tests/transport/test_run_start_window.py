"""A resume in the run-start window waits for the run to go live, then streams it (daphne + channels_redis).

The run is started and later claimed by *this* test process, like a worker process would;
the server learns of the claim through the Channels layer's cross-process wake-ups.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from helix_django.streams import get_stream_manager, reset_stream_managers
from tests.scale.settings import redis_channel_layer
from tests.transport.conftest import chat_url, layer_server, read_sse, run_in_start_window, worker_chunks

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_resume_in_the_run_start_window_waits_for_live_then_streams(daphne_server_factory, users):
    server, prefix = layer_server(daphne_server_factory)
    user, headers = users["a"]
    sid, started = run_in_start_window(user.pk)
    run = started.run
    result = {}

    def resume():
        with httpx.Client(headers=headers, timeout=20) as client:
            result["sse"] = read_sse(client, "GET", chat_url(server, sid), headers={"X-Resume-From-Sequence": "0"})
            result["at"] = time.monotonic()

    with override_settings(CHANNEL_LAYERS=redis_channel_layer(prefix)):
        reset_stream_managers()
        reader = threading.Thread(target=resume)
        reader.start()
        time.sleep(1.0)  # the resume is parked in the run-start window
        assert "sse" not in result
        claimed_at = time.monotonic()
        manager = get_stream_manager()
        chunks = worker_chunks(run, ["live now"])

        async def write_like_a_worker():
            await manager.claim_stream(sid, run.id, epoch=started.checkpoint.id)
            await manager.append(sid, run.id, chunks[:5])
            await asyncio.sleep(0.3)
            await manager.append(sid, run.id, chunks[5:])
            await manager.end_stream(sid, run.id)
            await asyncio.sleep(0.5)  # let the layer deliver the last wake-ups before this loop closes

        async_to_sync(write_like_a_worker)()
        reader.join(20)
        reset_stream_managers()
    sse = result["sse"]
    assert sse.status == 200 and sse.done
    assert result["at"] - claimed_at < 5  # woken by the claim, not by the 15 s fail-safe
    assert sse.chunks[0] == {"type": "start", "messageId": run.response_message_id}
    assert sse.text == "live now"
