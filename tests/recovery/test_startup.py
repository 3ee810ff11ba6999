"""RecoveryOnStartup: the scan starts on the first ASGI call (lifespan or request) and repeats."""

from __future__ import annotations

import asyncio

import pytest
from django.core.management import call_command

from helix_django.models import Run
from helix_django.recovery.startup import RecoveryOnStartup
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


async def test_lifespan_startup_runs_the_scan_and_shutdown_stops_it():
    from asgiref.sync import sync_to_async

    flight = await sync_to_async(InFlight)("s-lifespan")
    await sync_to_async(flight.stream_text)("partial")
    await sync_to_async(flight.expire)()
    calls: list[dict] = []

    async def inner(scope, receive, send):
        calls.append(scope)

    app = RecoveryOnStartup(inner, interval_seconds=0.05)
    messages = asyncio.Queue()
    sent: list[dict] = []
    await messages.put({"type": "lifespan.startup"})

    async def send(message):
        sent.append(message)

    lifespan = asyncio.create_task(app({"type": "lifespan"}, messages.get, send))
    for _ in range(100):
        if app.scans >= 2:
            break
        await asyncio.sleep(0.05)
    assert app.scans >= 2  # it repeats
    assert (await Run.objects.aget(pk=flight.run_id)).status == "interrupted"
    await messages.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(lifespan, 5)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]
    assert app.task.cancelled() or app.task.done()
    assert calls == []  # lifespan is handled here, never passed to an app that may not speak it


def test_command_repeats_with_every(capsys):
    call_command("helix_recover", "--every", "0.01", "--times", "2")
    assert capsys.readouterr().out.count("scanned=0") == 2


def test_relaunch_scan_task_runs_on_a_worker():
    from helix_django.recovery.tasks import relaunch_scan

    flight = InFlight("s-task")
    flight.stream_text("partial")
    flight.expire()
    result = relaunch_scan.enqueue()
    call_command("db_worker", "--batch", "--queue-name", "default", "--interval", "0")
    result.refresh()
    assert result.status.name == "SUCCESSFUL"
    assert result.return_value == {"scanned": 1, "interrupted": 1}
    assert Run.objects.get(pk=flight.run_id).status == "interrupted"
