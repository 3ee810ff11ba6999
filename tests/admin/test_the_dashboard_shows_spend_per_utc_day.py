"""The dashboard lists the tokens and cost of each of the last 14 UTC days, every ending included."""

from __future__ import annotations

from datetime import datetime, time, timedelta, timezone

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from helix_django.admin.spend import spend_per_day
from helix_django.models import Run
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"model-a": {"input": "2", "output": "10", "per": 1000}}


def run_at(session_id: str, at: datetime, status: str, usage: dict) -> None:
    flight = InFlight(session_id)
    Run.objects.filter(pk=flight.run_id).update(created_at=at, status=status, model="model-a", usage=usage)


@override_settings(HELIX={"MODEL_PRICES": PRICES}, TIME_ZONE="Pacific/Kiritimati")  # UTC+14: UTC days differ
def test_each_of_the_last_14_utc_days_shows_its_runs_tokens_and_cost(staff_client):
    now = datetime.now(timezone.utc)
    today = now.date()
    yesterday_late = datetime.combine(today - timedelta(days=1), time(23, 30), tzinfo=timezone.utc)
    run_at("s-day-1", yesterday_late, "completed", {"inputTokens": 100, "outputTokens": 10})
    run_at("s-day-2", yesterday_late - timedelta(hours=1), "cancelled", {"inputTokens": 50, "outputTokens": 5})
    three_days = datetime.combine(today - timedelta(days=3), time(12, 0), tzinfo=timezone.utc)
    run_at("s-day-3", three_days, "interrupted", {"inputTokens": 7, "outputTokens": 40, "estimatedTokens": 40})
    run_at("s-day-4", now - timedelta(days=20), "completed", {"inputTokens": 999, "outputTokens": 999})
    run_at("s-day-5", now, "completed", {"inputTokens": 1, "outputTokens": 1})

    with CaptureQueriesContext(connection) as queries:
        days = spend_per_day(now)
    assert len(queries.captured_queries) == 1
    assert [row.label for row in days] == [(today - timedelta(days=back)).isoformat() for back in range(14)]
    shown = {row.label: (row.runs, row.input_tokens, row.output_tokens, row.estimated_tokens, row.cost) for row in days}
    assert shown[today.isoformat()] == (1, 1, 1, 0, "0.012 USD")
    assert shown[(today - timedelta(days=1)).isoformat()] == (2, 150, 15, 0, "0.45 USD")  # (150 * 2 + 15 * 10) / 1000
    assert shown[(today - timedelta(days=3)).isoformat()] == (1, 7, 40, 40, "0.414 USD")
    assert shown[(today - timedelta(days=2)).isoformat()] == (0, 0, 0, 0, "—")
    assert sum(row.runs for row in days) == 4  # the run 20 days ago is outside
    cut = {row.label: (row.cut.runs, row.cut.total, row.cut.cost) for row in days}
    assert cut[(today - timedelta(days=1)).isoformat()] == (1, 55, "0.15 USD")  # the cancelled run: (100 + 50) / 1000
    assert cut[(today - timedelta(days=3)).isoformat()] == (1, 47, "0.414 USD")  # the interrupted one
    assert cut[today.isoformat()] == (0, 0, "—") and cut[(today - timedelta(days=2)).isoformat()] == (0, 0, "—")

    page = staff_client.get(reverse("admin:helix_django_run_dashboard"))
    assert [row.label for row in page.context["spend_days"]] == [row.label for row in days]
    body = page.content.decode()
    assert "Spend per day (last 14 days, UTC)" in body and "0.45 USD" in body
    assert "interrupted or cancelled: cost" in body and '<td class="helix-spend-cut-cost">0.15 USD</td>' in body
