"""The chunks every section writes: ~60-byte text deltas, as stored by the database manager."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

CHUNK_BYTES = 60


def delta(index: int, text_id: str = "txt_1") -> dict[str, Any]:
    """Return a ``text-delta`` chunk whose compact JSON is about 60 bytes."""
    head = {"type": "text-delta", "id": text_id, "delta": ""}
    room = CHUNK_BYTES - len(json.dumps(head, separators=(",", ":")))
    word = f"w{index} lorem ipsum dolor sit amet "
    return {"type": "text-delta", "id": text_id, "delta": (word * 4)[: max(room, 4)]}


def deltas(count: int) -> list[dict[str, Any]]:
    """Return ``count`` delta chunks."""
    return [delta(i) for i in range(count)]


def encoded(chunk: dict[str, Any]) -> str:
    """Return the compact JSON the database manager stores."""
    return json.dumps(chunk, separators=(",", ":"))


def unique(prefix: str) -> str:
    """Return a fresh stream/run id."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def batches(items: list[Any], size: int) -> list[list[Any]]:
    """Split ``items`` into lists of ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


class Timer:
    """``with Timer() as t: ...``; ``t.seconds`` is the wall time (perf_counter)."""

    def __enter__(self) -> Timer:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
