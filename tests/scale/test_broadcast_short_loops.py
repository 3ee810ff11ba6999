"""Cross-process wake-ups when the writing or reading event loop is short-lived.

Sync code (a management command, a task worker) calls the stream manager through
``async_to_sync``: each call runs on an event loop of its own that ends with the call.
Two DatabaseStreamManager instances stand for two processes, on a channels_redis layer.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from helix_django.streams.broadcast import GROUP
from helix_django.streams.database import DatabaseStreamManager
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, listening, parked, parked_reader

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


async def test_a_write_made_through_async_to_sync_wakes_a_reader_of_another_process():
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        try:
            task = await parked_reader(follower, "s1")
            await listening(follower)

            def write_like_a_command() -> None:  # each call: a loop of its own, closed when it returns
                async_to_sync(writer.claim_stream)("s1", "run_a", epoch=1)
                async_to_sync(writer.append)("s1", "run_a", [chunk(1), chunk(2)])
                async_to_sync(writer.end_stream)("s1", "run_a")

            started = time.monotonic()
            await asyncio.to_thread(write_like_a_command)
            got = await asyncio.wait_for(task, TIMEOUT)
            assert [s for s, _c in got] == [1, 2]
            assert time.monotonic() - started < 3, "the reader waited for a wake-up the writer never sent"
        finally:
            await follower.notifier.remote.aclose()


async def group_members(layer) -> list[bytes]:
    return await layer.connection(layer.consistent_hash(GROUP)).zrange(layer._group_key(GROUP), 0, -1)


async def test_a_listener_whose_loop_ends_takes_its_channel_out_of_the_group():
    """A reader parked from sync code (each call its own loop) leaves no dead channel in the group.

    channels_redis keeps a member for ``group_expiry`` (a day by default), and every later
    group_send of every process pushes a message to each member's channel.
    """
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        manager = DatabaseStreamManager("default", {})
        remote = manager.notifier.remote

        async def wait_a_moment_for_a_write() -> None:
            waiter = manager.subscribe("s1")
            await listening(manager)
            await waiter.wait(timeout=0.05)

        def wait_like_a_command() -> None:
            for _ in range(3):
                async_to_sync(wait_a_moment_for_a_write)()

        await asyncio.to_thread(wait_like_a_command)
        assert await group_members(remote.layer) == []


async def test_readers_parked_on_two_event_loops_of_one_process_are_both_woken_by_another_process(caplog):
    """A thread of its own (a task worker's, sync code through async_to_sync) parks while the main loop does.

    One channels_redis layer instance lets one event loop at a time receive: the second
    loop's listener must not fail on it (and wake every reader of the process each time).
    """
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        writer = DatabaseStreamManager("default", {})
        follower = DatabaseStreamManager("default", {})
        try:
            for stream_id in ("s1", "s2"):
                await writer.claim_stream(stream_id, "run_a", epoch=1)
            reader = await follower.create_resumable_reader("s1", from_sequence=0)
            reader.fail_safe_seconds = 3600
            task = asyncio.ensure_future(collect(reader))
            await parked(follower, "s1")
            await listening(follower)

            async def read_s2() -> list:
                other = await follower.create_resumable_reader("s2", from_sequence=0)
                other.fail_safe_seconds = 3600
                return await asyncio.wait_for(collect(other), TIMEOUT)

            side = asyncio.ensure_future(asyncio.to_thread(async_to_sync(read_s2)))
            for _ in range(200):
                if follower.notifier.waiter_count("s2"):
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)
            started = time.monotonic()
            for stream_id in ("s1", "s2"):
                await writer.append(stream_id, "run_a", [chunk(1)])
                await writer.end_stream(stream_id, "run_a")
            assert [s for s, _c in await asyncio.wait_for(task, TIMEOUT)] == [1]
            assert [s for s, _c in await asyncio.wait_for(side, TIMEOUT)] == [1]
            assert time.monotonic() - started < 3
            assert not [r for r in caplog.records if "channel layer" in r.getMessage()]
        finally:
            await writer.notifier.remote.aclose()
            await follower.notifier.remote.aclose()


async def test_a_listener_on_a_side_loop_leaves_the_shared_layer_to_the_main_loops_consumers():
    """Channels' consumers receive on the process's shared layer instance from the main loop."""
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(f"helix-test-{uuid.uuid4().hex}")):
        manager = DatabaseStreamManager("default", {})
        shared = manager.notifier.remote.layer
        side_listening = threading.Event()

        async def park_a_while() -> None:
            waiter = manager.subscribe("s1")
            await listening(manager)
            side_listening.set()
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:  # the join's wake-up ends a wait: park again
                await waiter.wait(timeout=deadline - time.monotonic())
                waiter = manager.subscribe("s1")
            waiter.cancel()

        side = asyncio.ensure_future(asyncio.to_thread(async_to_sync(park_a_while)))
        try:
            assert await asyncio.to_thread(side_listening.wait, TIMEOUT)
            await asyncio.sleep(0.1)  # the side loop's listener is inside receive()
            channel = await shared.new_channel()
            await shared.send(channel, {"type": "chat.message", "text": "hi"})
            assert (await asyncio.wait_for(shared.receive(channel), TIMEOUT))["text"] == "hi"
        finally:
            await side
