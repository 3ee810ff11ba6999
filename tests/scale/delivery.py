"""Per-delta delivery times of WebSocket readers on several server processes (one run)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import websockets

PREFIX = "/helix/api"


async def follow(ws_base_url: str, base_url: str, session_id: str, cookie: str, from_sequence: int) -> dict[int, float]:
    """Follow ``session_id`` over the WebSocket route; return ``{sequence: monotonic arrival time}``.

    Stops at the first non-chunk frame (the stream's end); raises AssertionError if that is not ``end``.
    """
    arrivals: dict[int, float] = {}
    url = f"{ws_base_url}/ws{PREFIX}/sessions/{session_id}/"
    async with websockets.connect(url, additional_headers={"Cookie": cookie}, origin=base_url) as ws:
        await ws.send(json.dumps({"type": "resume", "from_sequence": from_sequence}))
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if frame["type"] != "chunk":
                assert frame["type"] == "end", frame
                return arrivals
            assert frame["sequence"] not in arrivals, f"sequence {frame['sequence']} delivered twice"
            arrivals[frame["sequence"]] = time.monotonic()


def lag_figures(local: dict[int, float], remote: dict[int, float]) -> dict[str, Any]:
    """Return the remote reader's lag behind the local one, per sequence both received (seconds).

    Shape: ``{"sequences": n, "p50": s, "p99": s, "max": s}``; ``p99`` is the nearest-rank percentile.
    """
    lags = sorted(remote[s] - local[s] for s in local if s in remote)
    rank = max(0, min(len(lags) - 1, round(0.99 * len(lags)) - 1))
    return {"sequences": len(lags), "p50": statistics.median(lags), "p99": lags[rank], "max": lags[-1]}
