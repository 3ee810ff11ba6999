"""A benchmark provider whose text deltas carry their emission time (for the live SSE section).

Each delta's text is ``"<perf_counter> "`` taken when the provider yields it. On Linux
``time.perf_counter`` is CLOCK_MONOTONIC, shared by every process of the machine, so a
client in another process measures provider-to-reader delay exactly, even when deltas
were coalesced (every timestamp in a received delta counts once).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator

from helix_django.runtime.providers.base import BaseProvider, Finish, ProviderEvent, ProviderRequest, TextDelta


class ClockProvider(BaseProvider):
    """OPTIONS: ``TOKENS`` (deltas per reply, default 100), ``PACE_TPS`` (deltas per second, default 50).

    A user message ``tokens=<n>`` overrides ``TOKENS`` for that reply.
    """

    name = "bench-clock"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Yield ``TOKENS`` timestamped deltas at ``PACE_TPS``, then a finish."""
        tokens = int(self.options.get("TOKENS", 100))
        users = [m for m in request.messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
        if users and (match := re.fullmatch(r"tokens=(\d+)", users[-1]["content"].strip())):
            tokens = int(match.group(1))
        period = 1.0 / float(self.options.get("PACE_TPS", 50))
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index in range(tokens):
            delay = started + index * period - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            yield TextDelta(f"{time.perf_counter():.6f} ")
        yield Finish("stop", {"inputTokens": 1, "outputTokens": tokens})
