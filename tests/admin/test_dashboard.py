"""The operations dashboard: counts by status now and over 24 h, stuck, rates, latency; SVG charts, no CDN."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from helix_django.admin import dashboard
from helix_django.models import Run
from helix_django.streams.writer import WRITTEN_AT_KEY
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)


def test_dashboard_counts_rates_and_first_token_times(staff_client, viewer_client):
    for i, status in enumerate(["completed", "completed", "interrupted", "failed"]):
        flight = InFlight(f"s-dash-{i}")
        flight.write([{"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "x"}])
        # The first token 400 ms after the run started (the chunks carry their store time, in whole
        # milliseconds: the start is put on a whole millisecond so the page cannot show "399 ms").
        created = flight.run.created_at.replace(microsecond=flight.run.created_at.microsecond // 1000 * 1000)
        started_ms = round(created.timestamp() * 1000)
        flight.write([{"type": "text-delta", "id": "t", "delta": "y", WRITTEN_AT_KEY: started_ms + 400}])
        Run.objects.filter(pk=flight.run_id).update(status=status, started_at=None, created_at=created)
    stuck = InFlight("s-dash-stuck")
    stuck.expire()
    InFlight("s-dash-live")
    old = InFlight("s-dash-old").run_id
    Run.objects.filter(pk=old).update(status="failed", created_at=timezone.now() - timedelta(days=2))

    board = dashboard.build()
    assert board.live == {"streaming": 2}
    assert board.day == {"completed": 2, "interrupted": 1, "failed": 1, "streaming": 2}
    assert board.stuck == 1
    assert (board.interrupted_rate, board.failed_rate) == (0.25, 0.25)
    assert board.ttft_samples == 4 and board.ttft_p50 == pytest.approx(0.4, abs=0.0005)
    assert sum(board.chunks_per_minute) == 4
    assert sum(sum(counts.values()) for _h, counts in board.hourly) == 6

    url = reverse("admin:helix_django_run_dashboard")
    page = staff_client.get(url).content.decode()
    assert page.count("<svg") >= 4 and "cdn" not in page.lower()
    assert re.search(
        r'id="helix-stuck" href="[^"]*\?view=all&amp;stuck=yes"><strong>Stuck now</strong><span>1</span>', page
    )
    assert "25.0%" in page and "400 ms" in page
    assert reverse("admin:helix_django_run_changelist") + "?view=all&amp;status=interrupted" in page
    assert viewer_client.get(url).status_code == 200  # view permission is enough to look
    listing = staff_client.get(reverse("admin:helix_django_run_changelist"), {"view": "all"}).content.decode()
    assert f'href="{url}"' in listing
