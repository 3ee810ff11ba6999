"""Every stored chunk carries the time it was stored (the admin timeline's times and gaps); clients never see it."""

from __future__ import annotations

import time

import pytest

from helix_django.protocol import to_ui_chunk
from helix_django.streams.writer import WRITTEN_AT_KEY, StreamWriter

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_writer_stamps_each_flush_with_its_wall_clock_time(manager):
    await manager.claim_stream("s-at", "run_a", epoch=1)
    writer = StreamWriter(manager, "s-at", "run_a", flush_interval_ms=0)
    before = int(time.time() * 1000)
    writer.write({"type": "text-delta", "id": "t", "delta": "a"})
    await writer.flush()
    ((_seq, stored),) = await manager.read_all("s-at")
    assert before <= stored[WRITTEN_AT_KEY] <= int(time.time() * 1000)
    assert to_ui_chunk(stored) == {"type": "text-delta", "id": "t", "delta": "a"}
