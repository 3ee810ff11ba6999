"""Cross-process wake-ups of database-manager readers through the channels_redis layer."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
import uuid

import pytest
from django.test import override_settings

from helix_django.streams.broadcast import ChannelLayerBroadcaster, group_name
from helix_django.streams.database import DatabaseStreamManager
from tests.conftest import redis_url
from tests.live import REPO_ROOT, database_env
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, parked

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


def test_group_names_are_valid_for_any_stream_id():
    assert group_name("sess_01HZX") == "helix.stream.sess_01HZX"
    odd = group_name("a b/c{d}" * 20)
    assert odd.startswith("helix.stream.h")
    assert len(odd) < 100


async def test_in_memory_layer_attaches_nothing():
    assert DatabaseStreamManager("default", {}).notifier.remote is None


async def test_reader_of_another_manager_wakes_through_the_redis_layer():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        assert isinstance(follower.notifier.remote, ChannelLayerBroadcaster)
        try:
            reader = await follower.create_resumable_reader("s1", wait_for_live=True)
            reader.fail_safe_seconds = 3600
            task = asyncio.ensure_future(collect(reader))
            await parked(follower, "s1")
            started = time.monotonic()
            await writer.claim_stream("s1", "run_a", epoch=1)
            await writer.append("s1", "run_a", [chunk(1), chunk(2)])
            await writer.end_stream("s1", "run_a")
            got = await asyncio.wait_for(task, TIMEOUT)
            assert [s for s, _ in got] == [1, 2]
            assert time.monotonic() - started < 3
        finally:
            await writer.notifier.remote.aclose()
            await follower.notifier.remote.aclose()


async def test_a_waiter_released_twice_drops_the_process_listen_count_once():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        manager = DatabaseStreamManager("default", {})
        try:
            first, second = manager.subscribe("s1"), manager.subscribe("s1")
            listener = manager.notifier.remote._listeners[asyncio.get_running_loop()]
            assert listener.waiting.get("s1") == 2
            first.cancel()
            first.cancel()  # e.g. a wait that ended, then an explicit cancel
            assert listener.waiting.get("s1") == 1  # the other waiter keeps the process listening
            second.cancel()
            assert not listener.waiting.get("s1")
        finally:
            await manager.notifier.remote.aclose()


WRITER = textwrap.dedent(
    """
    import asyncio, sys, django
    django.setup()
    from helix_django.streams.database import DatabaseStreamManager

    async def main():
        manager = DatabaseStreamManager("default", {})
        assert manager.notifier.remote is not None
        await manager.claim_stream("s1", "run_a", epoch=1)
        for i in range(1, 4):
            await manager.append("s1", "run_a", [{"type": "text-delta", "id": "t", "delta": f"p{i} ", "_run": "run_a"}])
        await manager.end_stream("s1", "run_a")
        await asyncio.sleep(0.2)  # let the last group_send leave

    asyncio.run(main())
    """
)


async def test_a_write_in_another_process_wakes_a_parked_reader():
    prefix = f"helix-test-{uuid.uuid4().hex}"
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(prefix)):
        follower = DatabaseStreamManager("default", {})
        try:
            reader = await follower.create_resumable_reader("s1", wait_for_live=True)
            reader.fail_safe_seconds = 3600
            task = asyncio.ensure_future(collect(reader))
            await parked(follower, "s1")
            # The join of the stream's group is confirmed before the other process writes.
            listener = next(iter(follower.notifier.remote._listeners.values()))
            for _ in range(200):
                if listener.ready.is_set() and not follower.notifier.remote._tasks:
                    break
                await asyncio.sleep(0.01)
            env = {
                **os.environ,
                **database_env(),
                "DJANGO_SETTINGS_MODULE": "tests.scale.settings",
                "HELIX_TEST_LAYER_PREFIX": prefix,
                "HELIX_TEST_REDIS_URL": redis_url(),
                "PYTHONPATH": str(REPO_ROOT),
            }
            proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, env=env, cwd=REPO_ROOT)
            assert await asyncio.wait_for(proc.wait(), 60) == 0
            got = await asyncio.wait_for(task, TIMEOUT)
            assert [(s, c["delta"]) for s, c in got] == [(1, "p1 "), (2, "p2 "), (3, "p3 ")]
        finally:
            await follower.notifier.remote.aclose()
