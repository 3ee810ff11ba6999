"""In-memory stream manager: a real backend for one process (tests, single-process demos)."""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections.abc import Sequence
from typing import Any

from helix_django.errors import StreamFenceError
from helix_django.streams.base import (
    ACTIVE,
    ENDED,
    FAILED,
    PAUSED,
    RUN_ENDED,
    BaseStreamManager,
    Chunk,
    StoredChunk,
    StreamInfo,
)


class _MemoryStream:
    __slots__ = ("base", "chunks", "end_status", "epoch", "error", "run_id", "sequences", "status")

    def __init__(self) -> None:
        self.status = ACTIVE
        self.run_id = ""
        self.epoch = 0
        self.end_status = ""
        self.error: dict[str, Any] | None = None
        self.sequences: list[int] = []
        self.chunks: list[Chunk] = []
        self.base = 0
        """The head when the chunks were last purged."""

    @property
    def head(self) -> int:
        return self.sequences[-1] if self.sequences else self.base

    def info(self, stream_id: str) -> StreamInfo:
        return StreamInfo(stream_id, self.status, self.head, self.run_id, self.epoch, self.end_status, self.error)


class MemoryStreamManager(BaseStreamManager):
    """Keeps streams in a dict. Not persistent, one process only; passes the contract suite."""

    supports_pubsub = True
    supports_info_without_hop = True

    def __init__(self, alias: str, options: dict[str, Any]) -> None:
        super().__init__(alias, options)
        self._streams: dict[str, _MemoryStream] = {}
        self._lock = threading.Lock()

    def _fenced(self, stream_id: str, run_id: str) -> _MemoryStream:
        stream = self._streams.get(stream_id)
        if stream is None or stream.run_id != run_id:
            raise StreamFenceError(cause="stream_claimed_by_other_run")
        return stream

    async def claim_stream(self, stream_id: str, run_id: str, *, epoch: int, is_opening: bool = False) -> StreamInfo:
        with self._lock:
            stream = self._streams.setdefault(stream_id, _MemoryStream())
            same = stream.run_id == run_id and stream.epoch == epoch
            if not same and epoch <= stream.epoch:
                raise StreamFenceError(cause="stale_claim")
            if same and is_opening and stream.status != ACTIVE:
                raise StreamFenceError(cause=RUN_ENDED)
            stream.run_id, stream.epoch = run_id, epoch
            stream.status, stream.end_status, stream.error = ACTIVE, "", None
            info = stream.info(stream_id)
        self.notifier.notify(stream_id)
        return info

    async def append(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        return self._append_now(stream_id, run_id, chunks)

    def append_soon(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> asyncio.Future[list[int]]:
        """Store ``chunks`` now and return a settled future of their sequences (or of the fence error).

        No task per flush: the base class's task would cost a loop round per delta for a
        write that never waits.
        """
        future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(self._append_now(stream_id, run_id, chunks))
        except StreamFenceError as exc:
            future.set_exception(exc)
        return future

    def _append_now(self, stream_id: str, run_id: str, chunks: Sequence[Chunk]) -> list[int]:
        with self._lock:
            stream = self._fenced(stream_id, run_id)
            if stream.status != ACTIVE:
                raise StreamFenceError(cause="stream_not_active")
            head = stream.head
            sequences = list(range(head + 1, head + 1 + len(chunks)))
            stream.sequences.extend(sequences)
            stream.chunks.extend(chunks)
        self.notifier.notify(stream_id)
        return sequences

    def _set_status(self, stream_id: str, run_id: str, status: str, **fields: Any) -> StreamInfo:
        with self._lock:
            stream = self._fenced(stream_id, run_id)
            stream.status = status
            for name, value in fields.items():
                setattr(stream, name, value)
            info = stream.info(stream_id)
        self.notifier.notify(stream_id)
        return info

    async def end_stream(self, stream_id: str, run_id: str, *, end_status: str = "completed") -> StreamInfo:
        return self._set_status(stream_id, run_id, ENDED, end_status=end_status)

    async def fail_stream(self, stream_id: str, run_id: str, error: dict[str, Any]) -> StreamInfo:
        with self._lock:
            stream = self._fenced(stream_id, run_id)
            stream.sequences.append(stream.head + 1)
            stream.chunks.append({"type": "error", "errorText": error.get("error", "error"), "helixError": error})
        return self._set_status(stream_id, run_id, FAILED, error=error)

    async def pause_stream(self, stream_id: str, run_id: str) -> StreamInfo:
        return self._set_status(stream_id, run_id, PAUSED)

    async def purge_stream(self, stream_id: str) -> None:
        with self._lock:
            stream = self._streams.get(stream_id)
            if stream is None:
                return
            stream.base = stream.head
            stream.sequences, stream.chunks = [], []
            stream.status, stream.run_id, stream.end_status, stream.error = ENDED, "", "", None
        self.notifier.notify(stream_id)

    async def get_info(self, stream_id: str) -> StreamInfo | None:
        stream = self._streams.get(stream_id)
        return stream.info(stream_id) if stream else None

    async def read_after(
        self, stream_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredChunk], StreamInfo | None]:
        with self._lock:
            stream = self._streams.get(stream_id)
            if stream is None:
                return [], None
            start = bisect.bisect_right(stream.sequences, after)
            end = start + limit
            out = list(zip(stream.sequences[start:end], stream.chunks[start:end], strict=True))
            return out, stream.info(stream_id)
