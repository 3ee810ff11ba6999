"""The timestamped deltas the bare SSE routes stream (``/bench/sse`` and the site's own view)."""

import asyncio
import time
from collections.abc import AsyncIterator


async def paced_deltas(tokens: int, pace: float) -> AsyncIterator[tuple[int, str]]:
    """Yield ``(sequence, data)`` for ``tokens`` text deltas at ``pace`` per second, from sequence 1.

    ``data`` is the delta's JSON carrying its emission time (``time.perf_counter()``, as
    :class:`bench.provider.ClockProvider` does), taken when it is due.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    for index in range(tokens):
        delay = started + index / pace - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield index + 1, f'{{"type":"text-delta","id":"t","delta":"{time.perf_counter():.6f} "}}'
