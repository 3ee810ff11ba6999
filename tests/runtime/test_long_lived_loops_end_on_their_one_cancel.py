"""The long-lived loops around a library's blocking calls end on the one cancel a shutdown sends.

A loop's shutdown (pytest-asyncio's, asyncio.run's, a server's) cancels each task once and
waits for all of them. Two ways that cancel was lost, both seen in the tasks-executor
tests' teardown hanging 300 s:

- channels_redis and redis-py answer a cancel that cuts a read with a ConnectionError, which
  the channel-layer listener retried as an outage (the eleventh session);
- redis-py 8 sends every command through ``asyncio.wait_for`` (its socket timeout defaults to
  5 s), which on Python 3.10/3.11 drops a cancel that meets the send completing
  (cpython#86296); channels_redis's receive then blocks on the next BZPOPMIN (the twelfth
  session, found by tracing the listener task's steps).

The layers here stand in for those libraries: one turns its cancel into an error, one drops
the first cancel and goes on waiting, as the dropped ``wait_for`` does.
"""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest

from helix_django.deadlines import ends_when_cancelled
from helix_django.recovery.startup import RecoveryOnStartup
from helix_django.streams.broadcast import _LoopListener
from helix_django.streams.notify import StreamNotifier
from helix_django.streams.redis_connections import LoopState, RedisConnections
from helix_django.streams.tail import TailCache


class DropsFirstCancel:
    """Blocks until cancelled twice: the first cancel is dropped, as ``wait_for`` drops it on 3.10/3.11."""

    def __init__(self) -> None:
        self.calls = 0
        self.dropped = 0

    async def block(self, **_scan_options: object) -> dict:
        self.calls += 1
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if self.dropped:
                    raise
                self.dropped += 1


async def ends_within(task: asyncio.Future, seconds: float = 5) -> bool:
    done, _pending = await asyncio.wait({task}, timeout=seconds)
    return task in done


async def test_a_cancel_ends_the_work_even_when_the_work_drops_the_first_one():
    work = DropsFirstCancel()
    task = asyncio.ensure_future(ends_when_cancelled(work.block))
    await asyncio.sleep(0.05)
    task.cancel()
    assert await ends_within(task), "the dropped cancel kept the work alive"
    assert task.cancelled() and work.dropped == 1


async def test_the_result_and_errors_of_the_work_pass_through():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def fails() -> None:
        raise LookupError("no such run")

    assert await ends_when_cancelled(answer) == 42
    with pytest.raises(LookupError, match="no such run"):
        await ends_when_cancelled(fails)


def listener_on(layer) -> _LoopListener:
    broadcaster = SimpleNamespace(layer=layer, wake_all=lambda: None, refresh_seconds=300.0, heard=lambda _m: None)
    return _LoopListener(broadcaster, asyncio.get_running_loop())


class GroupOfOne:
    """The layer calls a listener makes before it receives: one channel, added to one group."""

    async def new_channel(self) -> str:
        return "listener-channel"

    async def group_add(self, group: str, channel: str) -> None:
        return None

    async def group_discard(self, group: str, channel: str) -> None:
        return None


class DropsFirstCancelLayer(GroupOfOne, DropsFirstCancel):
    """A channel layer whose receive drops the first cancel (channels_redis on redis-py 8, Python 3.11)."""

    async def receive(self, channel: str) -> dict:
        return await self.block()


async def test_the_channel_layer_listener_ends_when_its_layer_drops_the_cancel():
    layer = DropsFirstCancelLayer()
    listener = listener_on(layer)
    await listener.ready.wait()
    await asyncio.sleep(0.05)
    listener.task.cancel()
    assert await ends_within(listener.task), "the listener outlived its one cancel"
    assert listener.task.cancelled() and layer.dropped == 1 and layer.calls == 1


class CutByCancelLayer(GroupOfOne):
    """A channel layer whose receive, once cancelled, raises ConnectionError as a cut Redis read does."""

    def __init__(self) -> None:
        self.receives = 0

    async def receive(self, channel: str) -> dict:
        self.receives += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("Connection closed by server.") from None
        return {}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11's: 3.10 cannot tell")
async def test_the_channel_layer_listener_ends_when_its_cancel_comes_back_as_a_connection_error():
    layer = CutByCancelLayer()
    listener = listener_on(layer)
    await listener.ready.wait()
    await asyncio.sleep(0)
    assert layer.receives == 1
    listener.task.cancel()
    assert await ends_within(listener.task)
    assert listener.task.cancelled()
    assert layer.receives == 1  # never retried as an outage


class DropsFirstCancelPubSub(DropsFirstCancel):
    """A redis-py pub/sub whose listen drops the first cancel."""

    async def subscribe(self, channel: str) -> None:
        return None

    async def listen(self):
        yield {"type": "subscribe", "data": 1}
        await self.block()
        yield {}

    async def aclose(self) -> None:
        return None


async def test_the_redis_notify_listener_ends_when_its_subscription_drops_the_cancel():
    pubsub = DropsFirstCancelPubSub()
    closed = SimpleNamespace(aclose=lambda: asyncio.sleep(0))
    connections = RedisConnections("default", {}, "helix-notify", StreamNotifier(), "origin:", TailCache())
    state = LoopState(
        client=closed, pubsub_client=SimpleNamespace(pubsub=lambda: pubsub, aclose=closed.aclose), scripts={}
    )
    connections.states[asyncio.get_running_loop()] = state
    connections.start_listener()
    await asyncio.wait_for(state.ready.wait(), 5)
    await asyncio.sleep(0.05)
    closing = asyncio.ensure_future(connections.aclose())
    assert await ends_within(closing), "closing waited on a listener that outlived its cancel"
    assert pubsub.dropped == 1 and state.listener.done()


async def test_the_periodic_relaunch_scan_ends_when_a_scan_drops_the_cancel(monkeypatch):
    scan = DropsFirstCancel()
    monkeypatch.setattr("helix_django.recovery.scan.arecover", scan.block)

    async def app(scope, receive, send):
        return None

    startup = RecoveryOnStartup(app, interval_seconds=60)
    await startup({"type": "http"}, None, None)
    await asyncio.sleep(0.05)
    assert scan.calls == 1
    startup.task.cancel()
    assert await ends_within(startup.task), "the scan loop outlived its one cancel"
    assert startup.task.cancelled() and scan.dropped == 1
