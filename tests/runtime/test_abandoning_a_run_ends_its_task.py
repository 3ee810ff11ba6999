"""Abandoning a run ends its task, even when the cancel meets the provider's next event.

``executor.abandon`` is "the process died": the run's task ends and the run stays live in
the store for the relaunch scan. The cancel of the task is delivered in the loop iteration
in which the provider's next event arrives. On Python 3.10 and 3.11 ``asyncio.wait_for``
then returned the event and dropped the cancel (python/cpython#86296): the abandoned run
streamed on to its end, and a test waiting for its task timed out (the flaky hang of
``tests/adversarial/test_optimistic_send_start_races.py``). The attempt now reads the
provider's events in the run's own task under one idle deadline (``runtime/steps.py``), so
the cancel reaches the provider's await wherever it lands.
"""

from __future__ import annotations

import asyncio

import pytest

from helix_django.models import Run
from helix_django.runtime.providers.scripted import ScriptedProvider
from tests.runtime.conftest import (  # noqa: F401 - fixtures
    _close_worker_thread_connections,
    agent,
    executor,
    session,
    use_agents,
    user_message,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

#: The event the provider holds (1-based): the second text token of ``TEXT``.
HELD_EVENT = 2


class HeldProvider(ScriptedProvider):
    """The scripted provider, holding its ``HELD_EVENT``-th event until the test releases it."""

    reached: asyncio.Event
    """Set when the stream waits at the held event."""
    release: asyncio.Future[None]
    """Resolve it to let the held event out."""

    async def stream(self, request):
        position = 0
        async for event in super().stream(request):
            position += 1
            if position == HELD_EVENT:
                HeldProvider.reached.set()
                await HeldProvider.release
            yield event


def held_agent(options: dict) -> dict:
    return {**agent(options), "PROVIDER": {"BACKEND": f"{__name__}.HeldProvider", "OPTIONS": options}}


@pytest.mark.parametrize("ticks_after_release", [0, 1, 2])
async def test_abandoning_a_run_as_its_next_event_arrives_ends_its_task(
    executor,  # noqa: F811
    session,  # noqa: F811
    use_agents,  # noqa: F811
    ticks_after_release,
):
    """The cancel lands 0, 1 or 2 loop iterations after the held event is let out.

    With ``wait_for`` each offset lost the cancel: before the pending ``anext`` produced the
    event, before its waiter was woken, before the run's task ran again.
    """
    HeldProvider.reached, HeldProvider.release = asyncio.Event(), asyncio.get_running_loop().create_future()
    # Events after the held one, so that the run is still streaming 2 iterations after it
    # (since issue 23 the run does not yield after an event its provider waited for).
    use_agents(default=held_agent({"TEXT": "one two three four five six seven eight"}))
    handle = await executor.execute(session, [user_message("hi")])
    await asyncio.wait_for(HeldProvider.reached.wait(), 10)  # the run waits for its next event
    HeldProvider.release.set_result(None)  # the event arrives ...
    for _ in range(ticks_after_release):
        await asyncio.sleep(0)
    assert executor.abandon(handle.run_id)  # ... about when the cancel is delivered
    assert await executor.wait(handle.run_id, 10) == "abandoned"
    run = await Run.objects.aget(pk=handle.run_id)
    assert run.is_live and run.status == "streaming"  # left to the relaunch scan, as after a crash
