"""The timestamped deltas the bare SSE routes stream (``/bench/sse`` and the site's own view)."""

import asyncio
import random
import time
from collections.abc import AsyncIterator


async def paced_deltas(tokens: int, pace: float, *, spread: bool = True) -> AsyncIterator[tuple[int, str]]:
    """Yield ``(sequence, data)`` for ``tokens`` text deltas at ``pace`` per second, from sequence 1.

    ``data`` is the delta's JSON carrying its emission time (``time.perf_counter()``, as
    :class:`bench.provider.ClockProvider` does), taken when it is due. With ``spread`` the first
    delta is due at a random point of the first period (uniform in ``[0, 1/pace)``): streams opened at
    once would otherwise tick in lockstep, each loop round serving all of them, which no real
    server's generations do (helix's runs start a few milliseconds apart, so theirs spread
    over the period). Measured at 10 streams x 50/s: the durable floor's CPU per delta is
    about 20 % higher with the spread than in lockstep. Without it the first delta is due at
    once (the opens section times first frames).
    """
    loop = asyncio.get_running_loop()
    started = loop.time() + (random.uniform(0, 1 / pace) if spread else 0.0)
    for index in range(tokens):
        delay = started + index / pace - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield index + 1, f'{{"type":"text-delta","id":"t","delta":"{time.perf_counter():.6f} "}}'
