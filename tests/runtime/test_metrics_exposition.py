"""Prometheus metrics (HELIX["METRICS"]): run counters, time to first token, live gauges, the exposition view."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import RequestFactory, override_settings
from prometheus_client.parser import text_string_to_metric_families

from helix_django import metrics
from helix_django.models import Run
from tests.runtime.conftest import agent, helix, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def scrape() -> dict[tuple[str, tuple], float]:
    """Return ``{(sample name, sorted labels): value}`` of one GET of the metrics view."""
    response = metrics.metrics_view(RequestFactory().get("/metrics/"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_runs_time_to_first_token_and_gauges_are_exposed(executor, session):
    with override_settings(HELIX={**helix(default=agent({"PACE_TPS": 0})), "METRICS": True}):
        before = await sync_to_async(scrape)()
        handle = await executor.execute(session, [user_message("Count me please")])
        assert await executor.wait(handle.run_id, 20) == "completed"
        live = await Run.objects.acreate(
            id="run_live_gauge", session=session, status="streaming", response_message_id="m_live"
        )
        after = await sync_to_async(scrape)()
    started = value(after, "helix_runs_started_total", agent="default", kind="send")
    assert started - value(before, "helix_runs_started_total", agent="default", kind="send") == 1
    ended = ("helix_runs_ended_total", {"agent": "default", "status": "completed"})
    assert value(after, ended[0], **ended[1]) - value(before, ended[0], **ended[1]) == 1
    ttft = value(after, "helix_time_to_first_token_seconds_count", agent="default")
    assert ttft - value(before, "helix_time_to_first_token_seconds_count", agent="default") == 1
    duration = value(after, "helix_run_duration_seconds_count", agent="default", status="completed")
    assert duration >= 1
    assert value(after, "helix_runs_live", status="streaming") == 1
    assert value(after, "helix_runs_stuck") == 0
    assert value(after, "helix_streams_live") == 0  # the live row above is not its session's current run
    await live.adelete()


def test_the_metrics_view_is_off_by_default():
    from django.http import Http404

    with pytest.raises(Http404):
        metrics.metrics_view(RequestFactory().get("/metrics/"))
