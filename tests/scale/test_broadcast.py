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

from helix_django.streams.broadcast import GROUP, ChannelLayerBroadcaster
from helix_django.streams.database import DatabaseStreamManager
from tests.conftest import redis_url
from tests.live import REPO_ROOT, database_env
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, listening, parked, parked_reader

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


async def test_in_memory_layer_attaches_nothing():
    assert DatabaseStreamManager("default", {}).notifier.remote is None


async def test_reader_of_another_manager_wakes_through_the_redis_layer():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        assert isinstance(follower.notifier.remote, ChannelLayerBroadcaster)
        try:
            task = await parked_reader(follower, "s1")
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


class CountedSends:
    """Counts the group sends of a real channels_redis layer (each still goes to Redis)."""

    def __init__(self, layer) -> None:
        self.layer = layer
        self.sent: list[dict] = []
        self._send = layer.group_send
        layer.group_send = self.group_send

    async def group_send(self, group: str, message: dict) -> None:
        self.sent.append(message)
        await self._send(group, message)


async def test_the_writes_of_one_commit_leave_as_one_layer_message_and_wake_every_reader():
    streams = [f"s{n}" for n in range(40)]
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        sends = CountedSends(writer.notifier.remote.layer)
        try:
            for stream_id in streams:
                await writer.claim_stream(stream_id, "run_a", epoch=1)
            readers = []
            for stream_id in streams:
                reader = await follower.create_resumable_reader(stream_id, wait_for_live=True)
                reader.fail_safe_seconds = 3600
                readers.append(asyncio.ensure_future(collect(reader)))
            for stream_id in streams:
                await parked(follower, stream_id)
            await listening(follower)
            await asyncio.sleep(0.1)  # the claims' messages are out
            sends.sent.clear()

            # One append per stream, all at once: they share a group commit (or two).
            await asyncio.gather(*(writer.append(s, "run_a", [chunk(1)]) for s in streams))
            await asyncio.sleep(0.1)
            named = [stream for message in sends.sent for stream in message["streams"]]
            assert sorted(set(named)) == sorted(streams)
            assert len(sends.sent) <= 3, f"{len(sends.sent)} layer messages for one commit of {len(streams)} streams"

            for stream_id in streams:
                await writer.end_stream(stream_id, "run_a")
            got = await asyncio.wait_for(asyncio.gather(*readers), TIMEOUT)
            assert all([s for s, _c in chunks] == [1] for chunks in got)
        finally:
            await writer.notifier.remote.aclose()
            await follower.notifier.remote.aclose()


async def test_a_listener_stays_in_the_group_past_the_layers_group_expiry():
    layers = redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")
    layers["default"]["CONFIG"]["group_expiry"] = 2  # channels_redis drops a member older than this
    with override_settings(CHANNEL_LAYERS=layers):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        try:
            assert follower.notifier.remote.refresh_seconds == 1
            task = await parked_reader(follower, "s1")
            await listening(follower)
            await asyncio.sleep(3.5)  # past the group expiry of the first join

            started = time.monotonic()
            await writer.claim_stream("s1", "run_a", epoch=1)
            await writer.append("s1", "run_a", [chunk(1)])
            await writer.end_stream("s1", "run_a")
            assert [s for s, _c in await asyncio.wait_for(task, TIMEOUT)] == [1]
            assert time.monotonic() - started < 3
        finally:
            await writer.notifier.remote.aclose()
            await follower.notifier.remote.aclose()


async def test_a_closed_broadcaster_takes_its_channel_out_of_the_group():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        manager = DatabaseStreamManager("default", {})
        remote = manager.notifier.remote
        waiter = manager.subscribe("s1")
        await listening(manager)
        channel = next(iter(remote._listeners.values())).channel
        layer = remote.layer
        members = await layer.connection(layer.consistent_hash(GROUP)).zrange(layer._group_key(GROUP), 0, -1)
        assert channel.encode() in members
        waiter.cancel()
        await remote.aclose()
        members = await layer.connection(layer.consistent_hash(GROUP)).zrange(layer._group_key(GROUP), 0, -1)
        assert channel.encode() not in members


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
            task = await parked_reader(follower, "s1")
            await listening(follower)  # the join is confirmed before the other process writes
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
