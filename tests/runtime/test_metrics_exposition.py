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
    tokens = {"model": "scripted-1", "status": "completed", "source": "reported"}
    run = await Run.objects.aget(pk=handle.run_id)
    for kind, key in (("input", "inputTokens"), ("output", "outputTokens")):
        added = value(after, "helix_tokens_total", kind=kind, **tokens) - value(
            before, "helix_tokens_total", kind=kind, **tokens
        )
        assert added == run.usage[key] > 0
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


async def test_delivery_lag_of_live_readers_is_exposed_per_route(executor, session):
    """Each chunk a live reader sends is timed from its store (``_at``) to its frame (chat and raw stream routes)."""
    from helix_django.streams import get_stream_manager
    from helix_django.streams.reader import ResumableReader
    from helix_django.transport.frames import stream_frames
    from helix_django.transport.plan import ResponsePlan, plan_frames
    from helix_django.transport.replay import ResponseFilter

    with override_settings(
        HELIX={**helix(default=agent({"TEXT": "one two three four five", "PACE_TPS": 50})), "METRICS": True}
    ):
        before = await sync_to_async(scrape)()
        handle = await executor.execute(session, [user_message("time my chunks")])
        manager = get_stream_manager()
        info = await manager.get_info(session.stream_id)
        chat_reader = ResumableReader(
            manager, session.stream_id, from_sequence=handle.from_sequence, wait_for_live=False, info=info
        )
        plan = ResponsePlan(reader=chat_reader, filter=ResponseFilter(run_id=handle.run_id), run=handle.run)
        raw_reader = ResumableReader(
            manager, session.stream_id, from_sequence=handle.from_sequence, wait_for_live=False, info=info
        )
        chat_parts = [part async for part in plan_frames(plan)]
        raw_frames = [frame async for frame in stream_frames(raw_reader)]
        assert await executor.wait(handle.run_id, 20) == "completed"
        after = await sync_to_async(scrape)()
    assert chat_parts and raw_frames[-1]["type"] == "end"
    stamped = [c for _s, c in await manager.read_all(session.stream_id, after=handle.from_sequence) if "_at" in c]
    for route in ("chat", "stream"):
        count = value(after, "helix_delivery_lag_seconds_count", route=route)
        counted = count - value(before, "helix_delivery_lag_seconds_count", route=route)
        assert 0 < counted <= len(stamped), (route, counted, len(stamped))
        assert value(after, "helix_delivery_lag_seconds_sum", route=route) < 5 * counted  # seconds, not ms
