"""Redis stream manager: chunks in Redis Streams, claim and head in a hash, one script per write.

Connected through ``django_redis.get_redis_connection(OPTIONS["CONNECTION_ALIAS"])``
(default ``"default"``); the async API uses a ``redis.asyncio`` client built from that
connection's parameters, one per event loop. Layout (see :mod:`.redis_scripts`): for a
stream ``s``, ``<KEY_PREFIX>:{s}:meta`` (hash), ``<KEY_PREFIX>:{s}:chunks`` (stream,
entry ID ``<sequence>-0``) and ``<KEY_PREFIX>:{s}:floor`` (the last head, no TTL: a few
dozen bytes per stream, so a stream re-created after it expired never reuses a sequence)
share the hash tag ``{s}``. Every write is one Lua script that
checks the run-id fence, allocates sequences, adds the chunks, refreshes the TTL
(``OPTIONS["stream_ttl"]`` seconds, default ``HELIX["STREAM_TTL_SECONDS"]``) and publishes
a notice (the writing manager's origin token + the stream id) on ``<KEY_PREFIX>:notify``.
A read is one MULTI of the hash and an XRANGE, so chunks and info agree. Live readers wake
through one pub/sub subscription per process (no polling), for other processes' writes (a
write wakes its own process's readers directly); after a lost subscription every local
reader is woken to re-read from its cursor. Any failed Redis call raises
StreamConnectionError (retryable), never "absent".

Readers in the writing process are served from its tail (:mod:`.tail`; ``OPTIONS
["TAIL_CHUNKS"]``, default 256, 0 turns it off, and ``OPTIONS["TAIL_SECONDS"]``, default 5):
the chunks of its last appends, recorded once Redis acknowledged them, with the info the
append script returned. A reader reads Redis when its cursor is not inside the tail, after
any status change or claim (each drops the stream's entry), and on an event loop whose
subscription is not confirmed. A notice of another process's write drops the entry before
it wakes readers, and so does a notice that overtakes the reply of this process's own
append; a lost subscription empties the tail. So a reader that got a tail hit and parks
is woken by any later write, like one that read Redis.

Durability: with AOF on, a graceful Redis restart loses nothing; to keep sequences unique
after a crash of Redis itself, run it with ``appendfsync always``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from django.core.checks import CheckMessage, Error
from redis.exceptions import RedisError, ResponseError

from helix_django.conf import helix_settings
from helix_django.errors import StreamConnectionError, StreamFenceError
from helix_django.streams import redis_scripts
from helix_django.streams.base import (
    ENDED,
    FAILED,
    PAUSED,
    BaseStreamManager,
    Chunk,
    StoredChunk,
    StreamInfo,
    raise_connection_error,
)
from helix_django.streams.reader import ResumableReader
from helix_django.streams.redis_appends import PreparedAppend, RedisAppendQueue
from helix_django.streams.redis_connections import LoopState, RedisConnections
from helix_django.streams.tail import TailCache, stored_form
from helix_django.streams.window import window_options

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _dumps(chunk: Chunk) -> str:
    return json.dumps(chunk, separators=(",", ":"))


def _info(stream_id: str, values: Sequence[str | None]) -> StreamInfo | None:
    status, head, run_id, epoch, end_status, error = values
    if status is None:
        return None
    return StreamInfo(
        stream_id,
        status,
        int(head or 0),
        run_id or "",
        int(epoch or 0),
        end_status or "",
        json.loads(error) if error else None,
    )


class RedisStreamManager(BaseStreamManager):
    """Stream manager on Redis Streams (DESIGN, "Stream manager contract"; 002, "Key concepts").

    OPTIONS: ``CONNECTION_ALIAS`` (django-redis cache alias, default ``"default"``),
    ``KEY_PREFIX`` (default ``"helix:stream"``), ``stream_ttl`` (seconds),
    ``SOCKET_TIMEOUT`` (seconds per command, default 5), ``WRITE_RETRY_SECONDS`` (how long a
    write is resent while Redis is unreachable, default 10; reads never wait),
    ``TAIL_CHUNKS`` and ``TAIL_SECONDS`` (the process tail, module docstring),
    ``COMMIT_WINDOW_MS`` and ``COMMIT_WINDOW_RATE`` (appends of many streams sent as one
    pipeline, :mod:`.redis_appends`).
    """

    supports_pubsub = True
    is_persistent = True
    is_multi_process = True
    supports_info_without_hop = True

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        super().__init__(alias, options)
        self.connection_alias = self.options.get("CONNECTION_ALIAS", "default")
        self.key_prefix = self.options.get("KEY_PREFIX", "helix:stream")
        self.channel = f"{self.key_prefix}:notify"
        self.origin = uuid.uuid4().hex
        """Token of this manager instance on its published notices (``origin + stream_id``)."""
        self.tail = TailCache(
            max_chunks=int(self.options.get("TAIL_CHUNKS", 256)),
            ttl_seconds=float(self.options.get("TAIL_SECONDS", 5.0)),
        )
        """The chunks this process appended last, served to its readers without a read (module docstring)."""
        self.connections = RedisConnections(
            self.connection_alias, self.options, self.channel, self.notifier, self.origin, self.tail
        )
        """Clients and notify listener per event loop (:mod:`.redis_connections`)."""
        self.appends = RedisAppendQueue(self, window_options(self.options))
        """Appends queued for the loop's next pipelined batch while appends come fast (:mod:`.redis_appends`)."""

    @property
    def ttl_seconds(self) -> int:
        """Seconds a stream is kept after its last write (read at call time, never cached)."""
        ttl = self.options.get("stream_ttl", self.options.get("STREAM_TTL_SECONDS"))
        if ttl is None:
            ttl = helix_settings.STREAM_TTL_SECONDS
        return int(ttl)

    def keys(self, stream_id: str) -> list[str]:
        """Return ``[meta_key, chunks_key, floor_key]`` of ``stream_id`` (one hash slot; see :mod:`.redis_scripts`)."""
        base = f"{self.key_prefix}:{{{stream_id}}}"
        return [f"{base}:meta", f"{base}:chunks", f"{base}:floor"]

    # --- connections ---------------------------------------------------------------------

    @property
    def _states(self) -> dict[asyncio.AbstractEventLoop, LoopState]:
        return self.connections.states

    def _state(self) -> LoopState:
        return self.connections.state()

    async def _call(self, what: str, fn: Callable[[LoopState], Awaitable[T]]) -> T:
        try:
            return await fn(self._state())
        except ResponseError as exc:
            message = str(exc)
            if message.startswith(redis_scripts.FENCE_PREFIX):
                raise StreamFenceError(cause=message.split()[-1]) from None
            raise raise_connection_error(exc, what) from exc
        except (RedisError, OSError) as exc:
            raise raise_connection_error(exc, what) from exc

    async def _write(self, what: str, fn: Callable[[LoopState], Awaitable[T]]) -> T:
        """Run a write script, resending it while Redis is unreachable, for ``WRITE_RETRY_SECONDS``.

        Safe because every write is idempotent (batch ids; a re-claim by the same run and
        epoch succeeds), so a run goes on across a short Redis restart. Raises
        StreamConnectionError once the bound is spent.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(self.options.get("WRITE_RETRY_SECONDS", 10))
        delay = 0.05
        while True:
            try:
                return await self._call(what, fn)
            except StreamConnectionError:
                if loop.time() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    # --- live wake-ups -------------------------------------------------------------------

    def subscribe(self, stream_id: str) -> Any:
        """Return a waiter fired by the next write of ``stream_id`` in any process (pub/sub).

        Starts this loop's subscription if needed. Race-free even for a reader built
        directly on :class:`ResumableReader`: once the subscription is confirmed, every
        local waiter is woken to re-read, which covers a write published before that.
        """
        self.connections.start_listener()
        return self.notifier.subscribe(stream_id)

    async def create_resumable_reader(
        self, stream_id: str, *, from_sequence: int = 0, wait_for_live: bool = False
    ) -> ResumableReader | None:
        """Open a reader (see :meth:`BaseStreamManager.create_resumable_reader`) woken by pub/sub.

        The process's subscription is confirmed before the reader's first read, so no write
        between that read and its wait is missed. Raises StreamConnectionError when Redis is down.
        """
        info = await self.get_info(stream_id)
        if not wait_for_live and (info is None or info.status == FAILED):
            return None
        await self.connections.ensure_listener()
        return ResumableReader(self, stream_id, from_sequence=from_sequence, wait_for_live=wait_for_live, info=info)

    # --- writes --------------------------------------------------------------------------

    def _notice(self, stream_id: str) -> str:
        """The message a write publishes: this manager's origin token, then the stream id."""
        return self.origin + stream_id

    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int, is_opening: bool = False) -> StreamInfo:
        args = [run_id, str(int(epoch)), self.ttl_seconds, self.channel, self._notice(stream_id), int(is_opening)]
        self.tail.forget(stream_id)
        values = await self._write("claim", lambda s: s.scripts["claim"](keys=self.keys(stream_id), args=args))
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id, local_only=True)
        return _info(stream_id, values)  # type: ignore[return-value]

    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        """Store ``chunks`` (see the base class), then record them in the tail and wake this process's readers."""
        if not chunks:
            return []
        write = self.prepare_append(stream_id, run_id, chunks)
        token = self.tail.begin_write(stream_id)
        try:
            values = await self._write(
                "append", lambda s: s.scripts["append"](keys=self.keys(stream_id), args=write.args)
            )
        except BaseException:
            self.tail.end_write(stream_id, token)  # stored or not: unknown, so nothing is kept
            raise
        return self.appended(write, token, values)

    def append_soon(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Queue ``chunks`` for the loop's next pipelined batch of appends; return the future of their sequences.

        While the loop's appends come slowly each is sent at once in a task of its own, as
        :meth:`append` (:mod:`.redis_appends`).
        """
        return self.appends.submit(stream_id, run_id, chunks)

    def prepare_append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> PreparedAppend:
        """Encode ``chunks`` once: the append script's arguments (with a fresh batch id) and what the tail keeps."""
        if self.tail.is_enabled:
            forms = [stored_form(chunk, _dumps) for chunk in chunks]  # each chunk encoded once
            payloads, kept = [payload for payload, _ in forms], [keep for _, keep in forms]
        else:
            payloads, kept = [_dumps(chunk) for chunk in chunks], []
        args = [run_id, self.ttl_seconds, self.channel, self._notice(stream_id), uuid.uuid4().hex, *payloads]
        return PreparedAppend(stream_id, len(chunks), args, kept)

    def appended(self, write: PreparedAppend, token: int, values: Sequence[Any]) -> list[int]:
        """Record an acknowledged append (the script's reply ``values``) in the tail, wake this process's
        readers; return its sequences."""
        head = int(values[0])
        first = head - write.count + 1
        self.tail.end_write(write.stream_id, token, _info(write.stream_id, values[1:]), first, write.kept)
        self.notifier.notify(write.stream_id, local_only=True)
        return list(range(first, head + 1))

    async def _set_status(
        self, stream_id: str, run_id: str, status: str, *, end_status: str = "", error: dict[str, Any] | None = None
    ) -> StreamInfo:
        error_chunk = ""
        if error is not None:
            error_chunk = _dumps({"type": "error", "errorText": error.get("error", "error"), "helixError": error})
        args = [run_id, self.ttl_seconds, self.channel, self._notice(stream_id), status, end_status]
        args += [_dumps(error) if error is not None else "", error_chunk, uuid.uuid4().hex]
        self.tail.forget(stream_id)
        values = await self._write(status, lambda s: s.scripts["status"](keys=self.keys(stream_id), args=args))
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id, local_only=True)
        return _info(stream_id, values)  # type: ignore[return-value]

    async def end_stream(self, stream_id: str, run_id: str, *, end_status: str = "completed") -> StreamInfo:
        return await self._set_status(stream_id, run_id, ENDED, end_status=end_status)

    async def fail_stream(self, stream_id: str, run_id: str, error: dict[str, Any]) -> StreamInfo:
        return await self._set_status(stream_id, run_id, FAILED, error=error)

    async def pause_stream(self, stream_id: str, run_id: str) -> StreamInfo:
        return await self._set_status(stream_id, run_id, PAUSED)

    async def purge_stream(self, stream_id: str) -> None:
        meta, chunks_key, _floor = self.keys(stream_id)

        async def purge(state: LoopState) -> None:
            async with state.client.pipeline(transaction=True) as pipe:
                pipe.delete(chunks_key)
                pipe.hset(meta, mapping={"status": ENDED, "run_id": "", "end_status": "", "error": ""})
                await pipe.execute()

        if await self.get_info(stream_id) is None:
            return
        self.tail.forget(stream_id)
        await self._call("purge", purge)
        self.tail.forget(stream_id)
        self.notifier.notify(stream_id)

    # --- reads ---------------------------------------------------------------------------

    async def get_info(self, stream_id: str) -> StreamInfo | None:
        meta = self.keys(stream_id)[0]
        values = await self._call("info", lambda s: s.client.hmget(meta, list(redis_scripts.INFO_FIELDS)))
        # The client decodes responses (decode_responses=True); redis's types cannot say so.
        return _info(stream_id, values)  # type: ignore[arg-type]

    async def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        """Read from the process tail when it can answer (module docstring), else from Redis (see the base class)."""
        if self.tail.is_enabled:
            state = self._states.get(asyncio.get_running_loop())
            if state is not None and state.ready.is_set():
                hit = self.tail.read(stream_id, after, limit, allow_empty=True)
                if hit is not None:
                    return hit
        meta, chunks_key, _floor = self.keys(stream_id)

        async def read(state: LoopState) -> list[Any]:
            async with state.client.pipeline(transaction=True) as pipe:
                pipe.hmget(meta, list(redis_scripts.INFO_FIELDS))
                pipe.xrange(chunks_key, min=f"{max(after, 0) + 1}-0", max="+", count=limit)
                return await pipe.execute()

        values, entries = await self._call("read", read)
        out = [(int(entry_id.split("-", 1)[0]), json.loads(fields["c"])) for entry_id, fields in entries]
        return out, _info(stream_id, values)

    # --- lifecycle -----------------------------------------------------------------------

    def check(self) -> list[CheckMessage]:
        """Report a ``CONNECTION_ALIAS`` that is not a django-redis cache."""
        try:
            self.connections.client_kwargs()
        except Exception as exc:  # noqa: BLE001 - any failure is a configuration error here
            return [
                Error(
                    f"Stream manager {self.alias!r}: CACHES[{self.connection_alias!r}] is not a django-redis cache "
                    f"({type(exc).__name__}).",
                    hint="Point OPTIONS['CONNECTION_ALIAS'] at a django_redis.cache.RedisCache alias.",
                    id="helix_django.E010",
                )
            ]
        return []

    async def aclose(self) -> None:
        """Stop this loop's subscription and close its connections."""
        await self.connections.aclose()
