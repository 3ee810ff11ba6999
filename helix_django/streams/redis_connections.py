"""Connections of the Redis stream manager: one client pair and one pub/sub listener per event loop.

Clients are ``redis.asyncio`` clients built from the parameters of
``django_redis.get_redis_connection(alias)``; a client is bound to the loop that made it,
so each loop (daphne's, the executor's own loop thread, an ``async_to_sync`` call) gets its own,
and those of closed loops are dropped. The listener subscribes to the manager's notify
channel and wakes local waiters for writes of other processes (a notice is the writer's
origin token + the stream id; this process's own writes wake its waiters directly),
dropping the stream's entry in the process tail first; once (re-)subscribed, and when the
subscription is lost, it empties the tail and wakes every local waiter, so a write
published while it was not subscribed is re-read rather than missed.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from helix_django.deadlines import ends_when_cancelled, within
from helix_django.errors import StreamConnectionError
from helix_django.streams import redis_scripts
from helix_django.streams.notify import StreamNotifier
from helix_django.streams.tail import TailCache

logger = logging.getLogger(__name__)

_KWARGS = (
    "host",
    "port",
    "db",
    "username",
    "password",
    "path",
    "client_name",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_cert_reqs",
    "ssl_ca_certs",
    "ssl_check_hostname",
)


@dataclass
class LoopState:
    """The clients, scripts and listener of one event loop."""

    client: aioredis.Redis
    pubsub_client: aioredis.Redis
    scripts: dict[str, Any]
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    listener: asyncio.Task[None] | None = None


class RedisConnections:
    """Per-loop clients and notify listener of one manager (module docstring)."""

    def __init__(
        self,
        connection_alias: str,
        options: dict[str, Any],
        channel: str,
        notifier: StreamNotifier,
        origin: str,
        tail: TailCache,
    ) -> None:
        self.connection_alias = connection_alias
        self.options = options
        self.channel = channel
        self.notifier = notifier
        self.tail = tail
        """The manager's process tail: a notice of another process's write drops its stream's entry."""
        self.origin = origin
        """This manager's prefix on the notices it publishes (``origin + stream_id``): its own are skipped."""
        self.states: dict[asyncio.AbstractEventLoop, LoopState] = {}

    @property
    def socket_timeout(self) -> float:
        """Seconds per command (``OPTIONS["SOCKET_TIMEOUT"]``, default 5)."""
        return float(self.options.get("SOCKET_TIMEOUT", 5))

    def client_kwargs(self) -> tuple[type[aioredis.Connection], dict[str, Any]]:
        """Return the asyncio connection class and kwargs of the django-redis alias.

        Raises whatever django-redis raises for an alias that is not a django-redis cache.
        """
        from django_redis import get_redis_connection

        pool = get_redis_connection(self.connection_alias).connection_pool
        source = pool.connection_kwargs
        kwargs = {name: source[name] for name in _KWARGS if name in source}
        if issubclass(pool.connection_class, redis.UnixDomainSocketConnection):
            connection_class: type[Any] = aioredis.UnixDomainSocketConnection
        elif issubclass(pool.connection_class, redis.SSLConnection):
            connection_class = aioredis.SSLConnection
        else:
            connection_class = aioredis.Connection
        return connection_class, kwargs

    def state(self) -> LoopState:
        """Return the running loop's clients (made on first use)."""
        loop = asyncio.get_running_loop()
        state = self.states.get(loop)
        if state is None:
            for closed in [other for other in self.states if other.is_closed()]:
                del self.states[closed]
            connection_class, kwargs = self.client_kwargs()
            kwargs.setdefault("socket_connect_timeout", self.socket_timeout)

            def client(socket_timeout: float | None) -> aioredis.Redis:
                pool = aioredis.ConnectionPool(
                    connection_class=connection_class,
                    decode_responses=True,
                    socket_timeout=socket_timeout,
                    # One resend on a lost connection (a restarted Redis): writes carry a batch id.
                    retry=Retry(NoBackoff(), 1),
                    **kwargs,
                )
                return aioredis.Redis(connection_pool=pool)

            main = client(self.socket_timeout)
            scripts = {
                "append": main.register_script(redis_scripts.APPEND),
                "claim": main.register_script(redis_scripts.CLAIM),
                "status": main.register_script(redis_scripts.SET_STATUS),
            }
            state = self.states[loop] = LoopState(main, client(None), scripts)
        return state

    def wake_all(self) -> None:
        """Wake every local waiter (they re-read from their cursors)."""
        with self.notifier._lock:
            stream_ids = list(self.notifier._waiters)
        for stream_id in stream_ids:
            self.notifier.notify(stream_id, local_only=True)

    async def _listen(self, state: LoopState) -> None:
        delay = 0.05
        while True:
            pubsub = state.pubsub_client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                async for message in pubsub.listen():
                    if message["type"] == "subscribe":
                        delay = 0.05
                        # Writes published while we were not subscribed are re-read by everyone.
                        self.tail.clear()
                        state.ready.set()
                        self.wake_all()
                    elif message["type"] == "message" and not message["data"].startswith(self.origin):
                        # Another process wrote; this process's own writes woke every loop's
                        # waiters already (the notifier is thread-safe), so echoes are skipped.
                        # The tail entry goes first: a reader woken here must read Redis.
                        stream_id = message["data"][len(self.origin) :]
                        self.tail.forget(stream_id)
                        self.notifier.notify(stream_id, local_only=True)
            except (RedisError, OSError) as exc:
                logger.warning("redis stream notify subscription lost: %s", type(exc).__name__)
                state.ready.clear()
                self.tail.clear()
                self.wake_all()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            finally:
                await pubsub.aclose()

    def start_listener(self) -> LoopState:
        """Start the running loop's listener if it is not running; return the loop's state."""
        state = self.state()
        if state.listener is None or state.listener.done():
            state.listener = asyncio.get_running_loop().create_task(
                ends_when_cancelled(functools.partial(self._listen, state))
            )
        return state

    async def ensure_listener(self) -> None:
        """Start the listener and wait until it is subscribed; StreamConnectionError if it cannot be."""
        state = self.start_listener()
        try:
            await within(state.ready.wait(), self.socket_timeout)
        except asyncio.TimeoutError:  # not the builtin TimeoutError on 3.10
            raise StreamConnectionError(cause="subscribe") from None

    async def aclose(self) -> None:
        """Stop the running loop's listener and close its clients."""
        state = self.states.pop(asyncio.get_running_loop(), None)
        if state is None:
            return
        if state.listener is not None:
            state.listener.cancel()
            try:
                await state.listener
            except (asyncio.CancelledError, RedisError, OSError):
                pass
        await state.client.aclose()
        await state.pubsub_client.aclose()
