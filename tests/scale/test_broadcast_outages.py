"""Cross-process wake-ups across a cut of the channel layer's Redis connections.

The layer reaches the real Redis through a TCP relay in this test, which can cut every
connection and refuse new ones for a while: what a Redis restart or a network blip does
to a process. Two DatabaseStreamManager instances stand for two processes; only the
follower's layer goes through the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.test import override_settings

from helix_django.streams.database import DatabaseStreamManager
from tests.conftest import redis_url
from tests.scale.settings import redis_channel_layer
from tests.streams.helpers import chunk, collect, listening, parked, parked_reader

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


class Relay:
    """A TCP relay to the test Redis that can cut its connections and refuse new ones."""

    def __init__(self) -> None:
        parts = urlsplit(redis_url())
        self.target = (parts.hostname, parts.port or 6379)
        self._parts = parts
        self.refusing = False
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.serving: set[asyncio.Task] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        netloc = self._parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{port}"
        return urlunsplit(self._parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.close()
            return
        self.serving.add(asyncio.current_task())
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}
        self.serving.discard(asyncio.current_task())

    def cut(self) -> None:
        for writer in list(self.writers):
            writer.transport.abort()

    async def close(self) -> None:
        self.refusing = True
        self.server.close()
        self.cut()
        await asyncio.wait_for(asyncio.gather(*self.serving, return_exceptions=True), 5)


def layer_through(url: str, prefix: str) -> dict:
    layers = redis_channel_layer(prefix)
    layers["default"]["CONFIG"]["hosts"] = [{"address": url, "socket_timeout": 10}]
    return layers


class CountedAdds:
    """Counts the group_add calls of a real channels_redis layer (each still goes to Redis)."""

    def __init__(self, layer) -> None:
        self.calls = 0
        self._add = layer.group_add
        layer.group_add = self.group_add

    async def group_add(self, group: str, channel: str) -> None:
        self.calls += 1
        await self._add(group, channel)


async def rejoined(listener, seconds: float = 5.0) -> None:
    """Wait until the listener saw the cut (it stops hearing), then until it is in the group again."""
    deadline = time.monotonic() + seconds
    while listener.hearing and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    while not listener.hearing and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert listener.hearing, "the listener never joined again"


async def test_a_listener_that_rejoined_after_cuts_refreshes_its_membership_once_per_period():
    prefix = f"helix-test-{uuid.uuid4().hex}"
    relay = Relay()
    url = await relay.start()
    layers = layer_through(url, prefix)
    layers["default"]["CONFIG"]["group_expiry"] = 2  # a refresh every second
    with override_settings(CHANNEL_LAYERS=layers):
        follower = DatabaseStreamManager("default", {})
    remote = follower.notifier.remote
    try:
        waiter = follower.subscribe("s1")
        await listening(follower)
        listener = next(iter(remote._listeners.values()))
        for _ in range(3):
            relay.cut()
            await rejoined(listener)
        adds = CountedAdds(remote.layer)
        await asyncio.sleep(3.2)
        assert adds.calls <= 4, f"{adds.calls} group_add calls in 3 refresh periods"
        waiter.cancel()
    finally:
        await remote.aclose()
        await relay.close()


async def test_a_write_made_while_the_readers_layer_is_cut_off_reaches_it_once_the_layer_is_back():
    prefix = f"helix-test-{uuid.uuid4().hex}"
    relay = Relay()
    url = await relay.start()
    with override_settings(CHANNEL_LAYERS=layer_through(url, prefix)):
        follower = DatabaseStreamManager("default", {})
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(prefix)):
        writer = DatabaseStreamManager("default", {})
    try:
        task = await parked_reader(follower, "s1")
        await listening(follower)
        listener = next(iter(follower.notifier.remote._listeners.values()))

        relay.refusing = True
        relay.cut()
        while listener.hearing:
            await asyncio.sleep(0.01)
        await writer.claim_stream("s1", "run_a", epoch=1)
        await writer.append("s1", "run_a", [chunk(1), chunk(2)])
        await writer.end_stream("s1", "run_a")
        await asyncio.sleep(1.5)  # the follower keeps retrying against a Redis it cannot reach
        relay.refusing = False

        started = time.monotonic()
        got = await asyncio.wait_for(task, TIMEOUT)
        assert [s for s, _c in got] == [1, 2]
        assert time.monotonic() - started < 4
        await listening(follower)  # and the listener is in the group again
    finally:
        await writer.notifier.remote.aclose()
        await follower.notifier.remote.aclose()
        await relay.close()


async def test_a_write_whose_layer_message_meets_a_cut_still_wakes_the_reader_of_another_process():
    """The writer's layer connection is cut while it sends: its message leaves once Redis is back."""
    prefix = f"helix-test-{uuid.uuid4().hex}"
    relay = Relay()
    url = await relay.start()
    with override_settings(CHANNEL_LAYERS=redis_channel_layer(prefix)):
        follower = DatabaseStreamManager("default", {})
    with override_settings(CHANNEL_LAYERS=layer_through(url, prefix)):
        writer = DatabaseStreamManager("default", {})
    try:
        await writer.claim_stream("s1", "run_a", epoch=1)
        await asyncio.sleep(0.2)  # the claim's message is out: the writer's layer has a connection
        reader = await follower.create_resumable_reader("s1", from_sequence=0)
        reader.fail_safe_seconds = 3600
        task = asyncio.ensure_future(collect(reader))
        await parked(follower, "s1")
        await listening(follower)
        await asyncio.sleep(0.2)  # the join's wake-up was read: the reader is parked again
        await parked(follower, "s1")

        relay.refusing = True
        relay.cut()
        await writer.append("s1", "run_a", [chunk(1)])
        await writer.end_stream("s1", "run_a")
        await asyncio.sleep(0.5)  # the sends meet the cut
        relay.refusing = False

        started = time.monotonic()
        got = await asyncio.wait_for(task, TIMEOUT)
        assert [s for s, _c in got] == [1]
        assert time.monotonic() - started < 4
    finally:
        await writer.notifier.remote.aclose()
        await follower.notifier.remote.aclose()
        await relay.close()
