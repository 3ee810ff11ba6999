"""A durable scripted operation generates on its own timeline: ``stream_from`` sends the rest live.

Seen: ``ScriptedProvider.stream_from`` yielded every remaining event at once, so a run
re-attached to a still-running operation got the rest as one block. The operation's
events are due ``n / PACE_TPS`` after its creation; ``stream_from`` yields those already
due at once and each later one when it is due.
"""

from __future__ import annotations

import time

import pytest

from helix_django.runtime.providers.base import OperationStarted, Progress, ProviderRequest, TextDelta
from helix_django.runtime.providers.scripted import ScriptedProvider

pytestmark = [pytest.mark.timeout(30)]

TEXT = " ".join(f"w{i}" for i in range(20))
PACE = 20.0


async def test_stream_from_yields_the_due_events_at_once_and_the_rest_when_due():
    provider = ScriptedProvider({"TEXT": TEXT, "PACE_TPS": PACE, "DURABLE": True})
    request = ProviderRequest(
        model="m", system="", messages=[{"role": "user", "content": "hi"}], run_id="r", attempt_id="a"
    )
    events = provider.stream(request)
    operation, position, seen = "", 0, []
    async for event in events:
        if isinstance(event, OperationStarted):
            operation = event.operation_id
        elif isinstance(event, Progress):
            position = event.sequence
        elif isinstance(event, TextDelta):
            seen.append(event.text)
        if len(seen) == 5 and isinstance(event, Progress):
            break
    await events.aclose()
    time.sleep(0.2)  # the operation goes on: about 4 more tokens become due meanwhile
    started = time.monotonic()
    arrivals: list[float] = []
    async for event in provider.stream_from(operation, position):
        if isinstance(event, TextDelta):
            seen.append(event.text)
            arrivals.append(time.monotonic() - started)
    assert "".join(seen) == TEXT
    assert arrivals[2] < 0.5 / PACE  # already due: at once
    assert arrivals[-1] > 8 / PACE  # the rest on the operation's timeline, not one block
