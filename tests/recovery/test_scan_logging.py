"""A periodic scan that finds nothing logs at DEBUG; one that acts logs at INFO."""

from __future__ import annotations

import logging

import pytest

from helix_django.recovery.scan import arecover
from tests.recovery.factories import InFlight

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def scan_records(caplog):
    return [r for r in caplog.records if getattr(r, "helix_event", None) == "recovery.scan"]


async def test_an_empty_scan_is_debug_and_a_scan_that_acts_is_info(caplog):
    caplog.set_level(logging.DEBUG, logger="helix_django")
    await arecover()
    assert [r.levelno for r in scan_records(caplog)] == [logging.DEBUG]
    caplog.clear()
    from asgiref.sync import sync_to_async

    flight = await sync_to_async(InFlight)("s-log")
    await sync_to_async(flight.expire)()
    await arecover()
    records = scan_records(caplog)
    assert [r.levelno for r in records] == [logging.INFO]
    assert records[0].helix_fields["scanned"] == 1
