"""Cross-process stream wake-ups through the Channels layer.

With the in-memory channel layer (one process) nothing is sent. With a shared layer
(``channels_redis``) every process listens on one channel of its own per event loop,
added to one group, :data:`GROUP`, and wakes its local waiters of the streams a message
names. Each loop's listener receives on a layer instance of its own (channels_redis lets
one loop at a time receive on an instance, and Channels' consumers receive on the shared one).

Publishing is batched per event loop: the notifies of one loop turn (the streams one group
commit wrote) leave as one message, and while a send is in flight later notifies gather
for the next one. Under load a process so sends about one message per commit window
(:mod:`helix_django.streams.window`), whatever the number of live streams, instead of one
per flush; each layer message costs channels_redis four Redis round trips to send and a
blocking pop to receive. A send that fails is tried again (:data:`SEND_RETRIES`). A loop
that ends (``asyncio.run``, each ``async_to_sync`` call of sync code) cancels its send
task, which still sends what the loop wrote before it ends.

Each message carries the publishing broadcaster's origin token. A process ignores its own
messages (its notify woke its readers when it wrote). For another process's message it
first calls ``forget(stream_id)`` for each stream named (the database manager drops its
tail entry, so a reader is never answered from chunks this process wrote before the other
process's write), then wakes that stream's readers. A confirmed join and a layer outage
drop the whole tail (``forget_all``) and wake every reader: messages may have been missed
before them. :meth:`ChannelLayerBroadcaster.hears` tells whether the running loop's
channel is in the group (a confirmed join, no outage since): only then does every later
write of another process reach it.

A listener re-adds its channel to the group every ``refresh_seconds`` (at most half the
layer's ``group_expiry``), so its membership never expires while the process lives; a
listener leaves the group when its loop ends or :meth:`ChannelLayerBroadcaster.aclose` stops
it, and the channel of a killed process is dropped by channels_redis after ``group_expiry``. A lost message (a full
channel) costs a reader at most the fail-safe wait of ResumableReader.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer

from helix_django.conf import helix_settings
from helix_django.deadlines import cancel_requested, ends_when_cancelled
from helix_django.streams.base import BaseStreamManager
from helix_django.streams.notify import StreamNotifier

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "helix.streams.changed"
GROUP = "helix.streams"
"""The Channels group every listening process's channel is in."""

REFRESH_SECONDS = 300.0
OUTAGE_PAUSE_SECONDS = 1.0
SEND_RETRIES = 5
"""How many more times a loop's message is sent after a failed send, OUTAGE_PAUSE_SECONDS apart."""


class _LoopListener:
    """One process channel on one event loop, in :data:`GROUP`: wakes the readers of the streams a message names."""

    def __init__(
        self, broadcaster: ChannelLayerBroadcaster, loop: asyncio.AbstractEventLoop, layer: Any = None
    ) -> None:
        self.broadcaster = broadcaster
        self.loop = loop
        self.layer = broadcaster.layer if layer is None else layer
        """The layer this listener receives on: channels_redis lets one event loop at a time receive on one
        layer instance, so each loop's listener has an instance of its own (:meth:`ChannelLayerBroadcaster.listen`)."""
        self.channel: str | None = None
        self.ready = asyncio.Event()
        """Set once the channel is in the group (the first join confirmed)."""
        self.hearing = False
        """Whether the channel is in the group with no outage since: every other process's write reaches it."""
        self.refresh: asyncio.TimerHandle | None = None
        """The one pending re-add of the channel (each join replaces it)."""
        self.task = loop.create_task(self._run())

    async def _run(self) -> None:
        """Listen until cancelled (:meth:`ChannelLayerBroadcaster.aclose`, or the loop ending), then leave the group.

        A loop that ends (``asyncio.run``, an ``async_to_sync`` call) cancels this task once and
        runs the loop until it ends: a member left behind would stay for the layer's
        ``group_expiry`` and take a copy of every process's messages.
        """
        try:
            await ends_when_cancelled(self._receive)
        finally:
            if self.refresh is not None:
                self.refresh.cancel()
            if self.channel is not None:
                self.hearing = False
                try:
                    await self.layer.group_discard(GROUP, self.channel)
                except Exception as exc:  # noqa: BLE001 - channels_redis drops it after group_expiry
                    logger.warning("channel layer group_discard failed: %s", type(exc).__name__)
            if self.layer is not self.broadcaster.layer and hasattr(self.layer, "close_pools"):
                with contextlib.suppress(Exception):  # its loop's close closes them too
                    await self.layer.close_pools()

    async def _receive(self) -> None:
        layer = self.layer
        while True:
            try:
                if self.channel is None:
                    # The layer's default prefix: channels_redis serves every process-local channel
                    # of one instance and prefix from one Redis list, which receive() blocks on.
                    self.channel = await layer.new_channel()
                if not self.hearing:
                    await self._join()
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a layer outage must not end the listener
                if cancel_requested():  # the layer turned our cancel into its own error
                    raise asyncio.CancelledError from exc
                logger.warning("channel layer call failed: %s", type(exc).__name__)
                self.hearing = False
                self.broadcaster.wake_all()
                await asyncio.sleep(OUTAGE_PAUSE_SECONDS)
                continue
            self.broadcaster.heard(message)

    async def _join(self) -> None:
        """Add the channel to the group, then drop the tail and wake every reader (a re-read covers the gap)."""
        await self.layer.group_add(GROUP, self.channel)
        self.hearing = True
        self.ready.set()
        self.broadcaster.wake_all()
        self._schedule_refresh()

    def _schedule_refresh(self) -> None:
        if self.refresh is not None:
            self.refresh.cancel()
        self.refresh = self.loop.call_later(self.broadcaster.refresh_seconds, self._refresh)

    def _refresh(self) -> None:
        """Re-add the channel (channels_redis drops a member older than ``group_expiry``)."""
        if self.task.done() or self.channel is None:
            return
        self.broadcaster.spawn(self.loop, self.layer.group_add(GROUP, self.channel))
        self._schedule_refresh()


class _LoopPublisher:
    """The streams one event loop wrote since its last message, and the one send in flight."""

    def __init__(self, broadcaster: ChannelLayerBroadcaster, loop: asyncio.AbstractEventLoop) -> None:
        self.broadcaster = broadcaster
        self.loop = loop
        self.pending: dict[str, None] = {}
        self.sending = False

    def add(self, stream_id: str) -> None:
        self.pending[stream_id] = None
        if not self.sending:
            self.sending = True
            # The task first runs after this loop turn: every notify of one group commit joins its message.
            self.broadcaster.spawn(self.loop, self._send())

    async def _send(self) -> None:
        streams: list[str] = []
        failures = 0
        try:
            while self.pending:
                streams, self.pending = list(self.pending), {}
                if await self._group_send(streams):
                    failures = 0
                elif failures < SEND_RETRIES:
                    # A cut connection (a Redis restart, a network blip): the streams wait, with
                    # those written meanwhile, for the next try. Past the retries a reader elsewhere
                    # falls back on its fail-safe wait.
                    failures += 1
                    self.pending = {**dict.fromkeys(streams), **self.pending}
                    streams = []
                    await asyncio.sleep(OUTAGE_PAUSE_SECONDS)
                streams = []  # sent, or given up after the retries
        except asyncio.CancelledError:
            # The loop is ending: asyncio.run and async_to_sync (sync code: management commands,
            # task workers) cancel the tasks left when their coroutine returns, and still run the
            # loop until those tasks end. Nothing else cancels a send: the streams the loop wrote
            # (the batch cut short, and any gathered since) leave before the task ends.
            rest, self.pending = [*streams, *self.pending], {}
            if rest:
                await self._group_send(rest)
            raise
        finally:
            self.sending = False

    async def _group_send(self, streams: list[str]) -> bool:
        """Send one message naming ``streams``; return whether the layer took it."""
        try:
            await self.broadcaster.layer.group_send(GROUP, self.broadcaster.message(streams))
        except Exception as exc:  # noqa: BLE001 - retried by _send, then the fail-safe wait
            logger.warning("channel layer group_send failed: %s", type(exc).__name__)
            return False
        return True


class ChannelLayerBroadcaster:
    """``notifier.remote``: publishes notifies to :data:`GROUP` and wakes local waiters on receipt.

    ``publish``/``listen``/``unlisten`` are sync (called by :class:`StreamNotifier`) and
    schedule layer calls on the running loop. ``forget(stream_id)`` is called before the
    local waiters of a stream another process wrote are woken; ``forget_all()`` before
    every waiter is woken after a join or an outage (see the module docstring).
    """

    def __init__(
        self,
        notifier: StreamNotifier,
        layer: Any,
        forget: Callable[[str], None],
        forget_all: Callable[[], None],
        make_layer: Callable[[], Any] | None = None,
    ) -> None:
        self.notifier = notifier
        self.layer = layer
        """The layer messages are sent on (any loop may send on one instance)."""
        self.make_layer = make_layer
        """Makes the layer instance of each loop's listener (None: ``layer`` itself)."""
        self.forget = forget
        self.forget_all = forget_all
        self.origin = uuid.uuid4().hex
        """Marks this broadcaster's messages, which it ignores on receipt."""
        expiry = getattr(layer, "group_expiry", None)
        self.refresh_seconds = min(REFRESH_SECONDS, expiry / 2) if isinstance(expiry, int | float) else REFRESH_SECONDS
        self._listeners: dict[asyncio.AbstractEventLoop, _LoopListener] = {}
        self._publishers: dict[asyncio.AbstractEventLoop, _LoopPublisher] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, loop: asyncio.AbstractEventLoop, coro: Any) -> None:
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("channel layer call failed: %s", type(task.exception()).__name__)

    def message(self, streams: list[str]) -> dict[str, Any]:
        """Return the layer message telling that ``streams`` changed."""
        return {"type": MESSAGE_TYPE, "streams": streams, "origin": self.origin}

    def heard(self, message: dict[str, Any]) -> None:
        """Handle a message received on a listener's channel: another process's streams are re-read."""
        if message.get("type") != MESSAGE_TYPE or message.get("origin") == self.origin:
            return
        for stream_id in message.get("streams", ()):
            self.forget(stream_id)
            self.notifier.notify(stream_id, local_only=True)

    def wake_all(self) -> None:
        """Drop the whole tail and wake every local waiter (after a join or a lost layer connection)."""
        self.forget_all()
        with self.notifier._lock:
            stream_ids = list(self.notifier._waiters)
        for stream_id in stream_ids:
            self.notifier.notify(stream_id, local_only=True)

    def publish(self, stream_id: str) -> None:
        """Tell every other listening process that ``stream_id`` changed (batched per event loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            async_to_sync(self.layer.group_send)(GROUP, self.message([stream_id]))
            return
        publisher = self._publishers.get(loop)
        if publisher is None:
            for old in [lp for lp in self._publishers if lp.is_closed()]:
                del self._publishers[old]
            publisher = self._publishers[loop] = _LoopPublisher(self, loop)
        publisher.add(stream_id)

    def hears(self, stream_id: str) -> bool:
        """Whether another process's write of ``stream_id`` will be told here: this loop's channel is in the group."""
        try:
            listener = self._listeners.get(asyncio.get_running_loop())
        except RuntimeError:
            return False
        return listener is not None and listener.hearing

    def listen(self, stream_id: str) -> None:
        """Start the running loop's listener if it has none (a reader parks on ``stream_id``)."""
        loop = asyncio.get_running_loop()
        listener = self._listeners.get(loop)
        if listener is None or listener.task.done():
            for old in [lp for lp in self._listeners if lp.is_closed()]:
                del self._listeners[old]
            self._listeners[loop] = _LoopListener(self, loop, None if self.make_layer is None else self.make_layer())

    def unlisten(self, stream_id: str) -> None:
        """A reader stopped waiting on ``stream_id``: nothing to do, the loop's channel stays in the group."""

    async def aclose(self) -> None:
        """Stop this loop's listener and take its channel out of the group (tests; process shutdown)."""
        loop = asyncio.get_running_loop()
        listener = self._listeners.pop(loop, None)
        publisher = self._publishers.pop(loop, None)
        if publisher is not None and publisher.pending:
            await publisher._send()
        if listener is not None:
            listener.task.cancel()  # the task takes its channel out of the group as it ends
            await asyncio.wait([listener.task, *self._tasks], timeout=2)


def attach_broadcast(manager: BaseStreamManager, forget: Callable[[str], None], forget_all: Callable[[], None]) -> None:
    """Give ``manager`` a cross-process broadcaster when the channel layer spans processes.

    Uses ``HELIX["CHANNEL_LAYER"]`` (a ``CHANNEL_LAYERS`` alias). No-op without a layer or
    with the in-memory layer (one process). ``forget``: called with a stream id before
    another process's write of it wakes this process's readers; ``forget_all``: before every
    reader is woken after a join or an outage.
    """
    layer = get_channel_layer(helix_settings.CHANNEL_LAYER)
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return
    config = copy.deepcopy(channel_layers.configs[helix_settings.CHANNEL_LAYER].get("CONFIG", {}))
    manager.notifier.remote = ChannelLayerBroadcaster(
        manager.notifier, layer, forget, forget_all, make_layer=lambda: type(layer)(**config)
    )
