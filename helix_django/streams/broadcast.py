"""Cross-process stream wake-ups through the Channels layer.

With the in-memory channel layer (one process) nothing is sent. With a shared layer
(``channels_redis``), every notify is published to the group of the stream, and each
process listens on one channel of its own (per event loop), added to the groups of the
streams its readers park on, and wakes its local waiters.

Each message carries the publishing broadcaster's origin token. A process ignores its own
messages (its notify woke its readers when it wrote). For another process's message it
first calls ``forget(stream_id)`` (the database manager drops its tail entry of that
stream, so a reader is never answered from chunks this process wrote before the other
process's write), then wakes its readers. A confirmed join and a layer outage forget too:
messages may have been missed before them. :meth:`ChannelLayerBroadcaster.hears` tells
whether the running loop's channel is in a stream's group (a confirmed join not yet
left): only then does every later write of another process reach it.

A process joins a stream's group when a first reader parks on it and leaves it
``LINGER_SECONDS`` after the last one went away, so a reader that re-subscribes on every
chunk costs no layer round trip. Once a join is confirmed the stream's local readers are
woken to re-read, which covers a write published while the join was in flight. A lost
message (a full channel) costs a reader at most the fail-safe wait of ResumableReader.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from helix_django.conf import helix_settings
from helix_django.deadlines import cancel_requested, ends_when_cancelled
from helix_django.streams.base import BaseStreamManager
from helix_django.streams.notify import StreamNotifier

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "helix.stream.changed"
_GROUP_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")


def group_name(stream_id: str) -> str:
    """Return the Channels group of ``stream_id`` (a valid group name for any stream id)."""
    if _GROUP_SAFE.match(stream_id):
        return f"helix.stream.{stream_id}"
    return f"helix.stream.h{hashlib.sha256(stream_id.encode()).hexdigest()[:40]}"


class _LoopListener:
    """One process channel on one event loop: receives notifies for the groups it joined."""

    def __init__(self, broadcaster: ChannelLayerBroadcaster, loop: asyncio.AbstractEventLoop) -> None:
        self.broadcaster = broadcaster
        self.loop = loop
        self.channel: str | None = None
        self.ready = asyncio.Event()
        self.waiting: dict[str, int] = {}
        self.joined: dict[str, float] = {}
        self.heard: set[str] = set()
        """Streams whose group this channel is in (confirmed joins): their messages reach it."""
        self.task = loop.create_task(ends_when_cancelled(self._receive))

    async def _receive(self) -> None:
        layer = self.broadcaster.layer
        while True:
            try:
                if self.channel is None:
                    # The layer's default prefix, the one Channels' consumers use: channels_redis
                    # serves every process-local channel of one prefix from one Redis list, and
                    # whichever receive() holds its lock blocks on that prefix's list only, so a
                    # channel of its own prefix would wait behind any consumer's receive.
                    self.channel = await layer.new_channel()
                    self.ready.set()
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a layer outage must not end the listener
                if cancel_requested():  # the layer turned our cancel into its own error
                    raise asyncio.CancelledError from exc
                logger.warning("channel layer receive failed: %s", type(exc).__name__)
                self.joined.clear()
                self.heard.clear()
                self.broadcaster.notifier_wake_all()
                await asyncio.sleep(1.0)
                continue
            if message.get("type") == MESSAGE_TYPE and message.get("origin") != self.broadcaster.origin:
                self.broadcaster.forget(message["stream"])
                self.broadcaster.notifier.notify(message["stream"], local_only=True)

    async def join(self, stream_id: str) -> None:
        await self.ready.wait()
        try:
            await self.broadcaster.layer.group_add(group_name(stream_id), self.channel)
        except Exception as exc:  # noqa: BLE001
            logger.warning("channel layer group_add failed: %s", type(exc).__name__)
            self.joined.pop(stream_id, None)
        else:
            if stream_id in self.joined:
                self.heard.add(stream_id)
        # Anything published before the join completed is caught by a re-read.
        self.broadcaster.forget(stream_id)
        self.broadcaster.notifier.notify(stream_id, local_only=True)

    def leave_later(self, stream_id: str) -> None:
        self.loop.call_later(self.broadcaster.linger_seconds, self._leave_if_idle, stream_id)

    def _leave_if_idle(self, stream_id: str) -> None:
        joined_at = self.joined.get(stream_id)
        if self.waiting.get(stream_id) or joined_at is None:
            return
        if time.monotonic() - joined_at < self.broadcaster.linger_seconds:
            return
        del self.joined[stream_id]
        self.heard.discard(stream_id)
        self.broadcaster.spawn(self.loop, self.broadcaster.layer.group_discard(group_name(stream_id), self.channel))


class ChannelLayerBroadcaster:
    """``notifier.remote``: publishes notifies to stream groups and wakes local waiters on receipt.

    ``publish``/``listen``/``unlisten`` are sync (called by :class:`StreamNotifier`) and
    schedule layer calls on the running loop. ``forget(stream_id)`` is called before local
    waiters are woken by another process's message (see the module docstring).
    """

    linger_seconds: float = 60.0

    def __init__(self, notifier: StreamNotifier, layer: Any, forget: Callable[[str], None]) -> None:
        self.notifier = notifier
        self.layer = layer
        self.forget = forget
        self.origin = uuid.uuid4().hex
        """Marks this broadcaster's messages, which it ignores on receipt."""
        self._listeners: dict[asyncio.AbstractEventLoop, _LoopListener] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, loop: asyncio.AbstractEventLoop, coro: Any) -> None:
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("channel layer call failed: %s", type(task.exception()).__name__)

    def _listener(self, loop: asyncio.AbstractEventLoop) -> _LoopListener:
        listener = self._listeners.get(loop)
        if listener is None or listener.task.done():
            for old in [lp for lp in self._listeners if lp.is_closed()]:
                del self._listeners[old]
            listener = self._listeners[loop] = _LoopListener(self, loop)
        return listener

    def notifier_wake_all(self) -> None:
        """Wake every local waiter (after a lost layer connection)."""
        with self.notifier._lock:
            stream_ids = list(self.notifier._waiters)
        for stream_id in stream_ids:
            self.forget(stream_id)
            self.notifier.notify(stream_id, local_only=True)

    def publish(self, stream_id: str) -> None:
        """Send a wake-up for ``stream_id`` to every process listening on it."""
        message = {"type": MESSAGE_TYPE, "stream": stream_id, "origin": self.origin}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            async_to_sync(self.layer.group_send)(group_name(stream_id), message)
            return
        self.spawn(loop, self.layer.group_send(group_name(stream_id), message))

    def hears(self, stream_id: str) -> bool:
        """Whether this loop's channel is in ``stream_id``'s group: another process's write of it will be told."""
        try:
            listener = self._listeners.get(asyncio.get_running_loop())
        except RuntimeError:
            return False
        return listener is not None and stream_id in listener.heard

    def listen(self, stream_id: str) -> None:
        """Count a local waiter on ``stream_id``; join its group if not joined yet."""
        listener = self._listener(asyncio.get_running_loop())
        listener.waiting[stream_id] = listener.waiting.get(stream_id, 0) + 1
        if stream_id not in listener.joined:
            listener.joined[stream_id] = time.monotonic()
            self.spawn(listener.loop, listener.join(stream_id))
        else:
            listener.joined[stream_id] = time.monotonic()

    def unlisten(self, stream_id: str) -> None:
        """Forget a local waiter; leave the group after ``linger_seconds`` without waiters."""
        try:
            listener = self._listeners.get(asyncio.get_running_loop())
        except RuntimeError:
            return
        if listener is None:
            return
        count = listener.waiting.get(stream_id, 0)
        if count > 1:
            listener.waiting[stream_id] = count - 1
        elif count == 1:
            del listener.waiting[stream_id]
            listener.leave_later(stream_id)

    async def aclose(self) -> None:
        """Stop this loop's listener (tests; process shutdown)."""
        listener = self._listeners.pop(asyncio.get_running_loop(), None)
        if listener is not None:
            listener.task.cancel()
            await asyncio.wait([listener.task, *self._tasks], timeout=2)


def attach_broadcast(manager: BaseStreamManager, forget: Callable[[str], None]) -> None:
    """Give ``manager`` a cross-process broadcaster when the channel layer spans processes.

    Uses ``HELIX["CHANNEL_LAYER"]`` (a ``CHANNEL_LAYERS`` alias). No-op without a layer or
    with the in-memory layer (one process). ``forget``: called with a stream id before
    another process's write of it wakes this process's readers.
    """
    layer = get_channel_layer(helix_settings.CHANNEL_LAYER)
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return
    manager.notifier.remote = ChannelLayerBroadcaster(manager.notifier, layer, forget)
