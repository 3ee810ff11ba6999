"""In-process tail of recently appended chunks, so live readers skip the backend.

A stream manager keeps, per stream, the chunks this process appended last (at most
``max_chunks``, for ``ttl_seconds`` after the last append), with the stream info its
write committed. A reader whose cursor falls inside that tail is served from memory: no
thread hop, no query. This is safe because a stored chunk never changes (sequences are
never rewound or reused), entries are only written after the backend acknowledged the
write, and every status change or claim made through the manager drops the stream's
entry, so the caught-up check of a reader still sees ``ended``/``failed``/a new claim
from the backend. The info served with a hit is the one committed with those chunks, so
its ``head_sequence`` covers them.

A chunk of scalar values (a text delta, a step marker) is kept as an
:class:`~helix_django.shared_chunks.EncodedChunk` with its UI chunk and that chunk's wire
JSON, encoded once at the write (:func:`stored_form`); each hit hands every reader its own
copy of it (no decode). Any other chunk is kept as its stored JSON and decoded afresh for
each hit, like a backend read. Readers never share a stored chunk's dict.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]

from helix_django.protocol import is_internal
from helix_django.shared_chunks import EncodedChunk, UIChunk, encode_ui
from helix_django.streams.info import Chunk, StoredChunk, StreamInfo

Kept = EncodedChunk | str
"""What the tail keeps of one chunk: the chunk with its UI chunk encoded, or its stored JSON."""
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _flat_encoder() -> Callable[[Chunk], str]:
    """Compact ASCII JSON of a dict of scalar values: the C encoder, built once, without a circularity check
    (a dict of scalars holds no container to revisit)."""
    standard = json.JSONEncoder(separators=(",", ":")).encode
    try:
        iterencode = c_make_encoder(None, None, encode_basestring_ascii, None, ":", ",", False, False, True)
        sample = {"type": "t", "a": "\u00e9\n", "b": 1, "c": 1.5, "d": None, "e": True}
        if "".join(iterencode(sample, 0)) != standard(sample):
            return standard
    except TypeError:  # pragma: no cover - no C accelerator, or another signature
        return standard
    return lambda value: "".join(iterencode(value, 0))


_encode_flat = _flat_encoder()


def stored_form(chunk: Chunk, encode: Callable[[Chunk], str]) -> tuple[str, Kept]:
    """Return the stored JSON of ``chunk`` (``encode``: compact, ASCII) and what the tail keeps of it.

    A chunk of scalar values is encoded once. Its UI chunk (the public keys) is the
    stored JSON cut before the first reserved ``_`` key when those keys come last (the
    run's stamps do), else encoded apart; where that text has no ``\\u`` escape, which
    ASCII JSON writes for every character ``encode_ui`` would keep as is, it is the UI
    chunk's wire JSON too. In a dict of scalars ``,"<key>":`` only occurs between two
    entries: a quote inside a string is escaped.
    """
    public: dict[str, object] = {}
    first_reserved = ""
    is_ordered = True
    for key, value in chunk.items():
        if type(value) not in _SCALARS or type(key) is not str:
            payload = encode(chunk)  # decoded afresh for each reader
            return payload, payload
        if key[:1] == "_":
            first_reserved = first_reserved or key
        else:
            is_ordered = is_ordered and not first_reserved
            public[key] = value
    kind = chunk.get("type", "")
    if not isinstance(kind, str):
        payload = encode(chunk)
        return payload, payload
    payload = _encode_flat(chunk)
    kept = EncodedChunk(chunk)
    if is_internal(chunk):
        kept.ui = None
        return payload, kept
    if not first_reserved:
        text = payload
    elif not public:
        text = "{}"
    elif is_ordered:
        text = payload[: payload.index("," + encode_basestring_ascii(first_reserved) + ":")] + "}"
    else:
        text = _encode_flat(public)
    ui = kept.ui = UIChunk(public)
    ui.json = text if "\\u" not in text else encode_ui(public)
    return payload, kept


class _Tail:
    __slots__ = ("first", "info", "payloads", "touched")

    def __init__(self, info: StreamInfo, first: int, payloads: list[Kept]) -> None:
        self.info = info
        self.first = first
        self.payloads = payloads
        self.touched = time.monotonic()


class TailCache:
    """Recent chunks per stream (``max_chunks`` each; entries expire ``ttl_seconds`` after their last append).

    Thread-safe: writers and readers may run on several event loops.
    """

    def __init__(self, *, max_chunks: int = 256, ttl_seconds: float = 5.0, max_streams: int = 10_000) -> None:
        self.max_chunks = max_chunks
        self.ttl_seconds = ttl_seconds
        self.max_streams = max_streams
        self._entries: dict[str, _Tail] = {}
        self._lock = threading.Lock()
        self._forgets = 0
        """How many times a stream was forgotten or the cache cleared: the token of :meth:`begin_write`."""
        self._writes: dict[str, list[int]] = {}
        """Streams with writes in flight: ``[writes in flight, value of _forgets at its last forget]``."""

    @property
    def is_enabled(self) -> bool:
        """Whether the cache keeps anything (``max_chunks`` > 0)."""
        return self.max_chunks > 0

    def extend(self, stream_id: str, info: StreamInfo, first_sequence: int, payloads: list[Kept]) -> None:
        """Record committed chunks (:func:`stored_form`; sequences from ``first_sequence``) and their info."""
        if not self.is_enabled or not payloads:
            return
        with self._lock:
            self._extend(stream_id, info, first_sequence, payloads)

    def begin_write(self, stream_id: str) -> int:
        """Note a write of ``stream_id`` sent to the backend; return the token :meth:`end_write` takes.

        For a manager whose stream may be written by other processes, which it learns of by
        notices that may overtake the reply of its own write: a :meth:`forget` or
        :meth:`clear` between the two keeps that write's chunks out of the cache.
        """
        with self._lock:
            pending = self._writes.get(stream_id)
            if pending is None:
                pending = self._writes[stream_id] = [0, 0]
            pending[0] += 1
            return self._forgets

    def end_write(
        self,
        stream_id: str,
        token: int,
        info: StreamInfo | None = None,
        first_sequence: int = 0,
        payloads: list[Kept] | None = None,
    ) -> None:
        """End a write begun with :meth:`begin_write`: record its chunks (as :meth:`extend`), or drop the entry.

        The entry is dropped instead when the stream was forgotten (or the cache cleared)
        since the write began, and when ``info`` is None (the write failed: what the
        backend holds is unknown).
        """
        with self._lock:
            pending = self._writes[stream_id]
            pending[0] -= 1
            is_spoiled = pending[1] > token
            if not pending[0]:
                del self._writes[stream_id]
            if is_spoiled or info is None:
                self._entries.pop(stream_id, None)
            elif self.is_enabled and payloads:
                self._extend(stream_id, info, first_sequence, payloads)

    def _extend(self, stream_id: str, info: StreamInfo, first_sequence: int, payloads: list[Kept]) -> None:
        entry = self._entries.get(stream_id)
        if entry is not None and entry.first + len(entry.payloads) == first_sequence:
            entry.payloads.extend(payloads)
            entry.info = info
            entry.touched = time.monotonic()
        else:
            entry = self._entries[stream_id] = _Tail(info, first_sequence, list(payloads))
        excess = len(entry.payloads) - self.max_chunks
        if excess > 0:
            del entry.payloads[:excess]
            entry.first += excess
        if len(self._entries) > self.max_streams:
            self._sweep()

    def info(self, stream_id: str) -> StreamInfo | None:
        """Return the info committed with the last chunks recorded for ``stream_id``, while its entry is fresh.

        What the group commit compares a stream's row with instead of reading it
        (:mod:`._group_commit`): a stale answer costs a retry, never a wrong write.
        """
        entry = self._entries.get(stream_id)  # one dict read: atomic without the lock
        if entry is None or time.monotonic() - entry.touched > self.ttl_seconds:
            return None
        return entry.info

    def forget(self, stream_id: str) -> None:
        """Drop the entry of ``stream_id`` (its status changed, or this process lost the claim).

        A write of it in flight (:meth:`begin_write`) records nothing when it ends.
        """
        with self._lock:
            self._entries.pop(stream_id, None)
            self._forgets += 1
            pending = self._writes.get(stream_id)
            if pending is not None:
                pending[1] = self._forgets

    def clear(self) -> None:
        """Drop every entry; no write in flight records anything when it ends (notices may have been lost)."""
        with self._lock:
            self._entries.clear()
            self._forgets += 1
            for pending in self._writes.values():
                pending[1] = self._forgets

    def read(
        self, stream_id: str, after: int, limit: int, *, allow_empty: bool = False
    ) -> tuple[list[StoredChunk], StreamInfo] | None:
        """Return up to ``limit`` chunks after ``after`` and their info, or None when the tail cannot answer.

        None unless the entry is fresh and holds every chunk from ``after + 1`` to its
        head, and at least one of them, or, with ``allow_empty``, ``after`` is its head
        (a caught-up reader: answered ``[]`` with the committed info; only sound when no
        other process can write the stream unannounced: the manager forgets the entry on
        another process's notice before it wakes readers, the database manager through its
        channel-layer broadcaster while its loop's channel is in the broadcast group, the Redis manager
        through its pub/sub listener).
        """
        with self._lock:
            entry = self._entries.get(stream_id)
            if entry is None:
                return None
            if time.monotonic() - entry.touched > self.ttl_seconds:
                del self._entries[stream_id]
                return None
            info, first = entry.info, entry.first
            head = info.head_sequence
            if after == head and allow_empty:
                return [], info
            if after >= head or after < first - 1:
                return None
            start, end = after + 1 - first, min(head, after + limit) + 1 - first
            payloads = entry.payloads[start:end]
        loads = json.loads
        return [
            (first + start + i, loads(p) if isinstance(p, str) else p.for_reader()) for i, p in enumerate(payloads)
        ], info

    def _sweep(self) -> None:
        now = time.monotonic()
        stale = [key for key, entry in self._entries.items() if now - entry.touched > self.ttl_seconds]
        for key in stale:
            del self._entries[key]
