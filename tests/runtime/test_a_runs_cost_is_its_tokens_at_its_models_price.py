"""A run's cost is its tokens at its model's price (HELIX["MODEL_PRICES"], helix_django/pricing.py).

The finish chunk's metadata, the snapshot's ``runUsage`` and the Prometheus ``helix_cost_total``
carry it when the model has a price; a malformed table is a system check error (E011).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from helix_django.checks import check_settings
from helix_django.models import Run
from helix_django.pricing import Cost, Price, run_cost
from helix_django.snapshot import abuild_snapshot
from tests.runtime.conftest import agent, helix, stream_chunks, user_message
from tests.runtime.test_metrics_exposition import scrape, value

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

PRICES = {"scripted-1": {"input": "0.40", "output": "1.60", "cached_input": "0.10", "per": 1_000_000}}


def test_cached_input_is_priced_apart_and_estimated_output_as_output():
    price = Price(Decimal("0.40"), Decimal("1.60"), Decimal("0.10"), 1_000_000, "USD")
    usage = {"inputTokens": 1000, "cachedTokens": 400, "outputTokens": 500, "estimatedTokens": 200}
    assert price.cost(usage) == Decimal("0.00108")  # (600 * 0.40 + 400 * 0.10 + 500 * 1.60) / 1e6


def test_a_model_without_a_price_has_no_cost():
    with override_settings(HELIX={"MODEL_PRICES": PRICES}):
        assert run_cost("other-model", {"inputTokens": 10, "outputTokens": 5}) is None
        assert run_cost("scripted-1", {"inputTokens": 10, "outputTokens": 5}) == Cost(Decimal("0.000012"), "USD")
        assert run_cost("scripted-1", {"inputTokens": 10}).as_json() == {"amount": "0.000004", "currency": "USD"}


def test_a_malformed_price_table_is_a_check_error():
    table = {
        "good": {"input": "1", "output": "2", "currency": "EUR"},
        "float": {"input": 0.4, "output": "1.60"},
        "no-output": {"input": "0.40"},
        "per-zero": {"input": "0.40", "output": "1", "per": 0},
        "typo": {"input": "0.40", "output": "1", "cached": "0.1"},
    }
    with override_settings(HELIX={"MODEL_PRICES": table}):
        errors = [(m.id, m.msg) for m in check_settings() if m.id == "helix_django.E011"]
    assert errors == [
        ("helix_django.E011", "HELIX['MODEL_PRICES']['float']: 'input' must be a decimal string, got 0.4"),
        ("helix_django.E011", "HELIX['MODEL_PRICES']['no-output']: 'output' is missing"),
        ("helix_django.E011", "HELIX['MODEL_PRICES']['per-zero']: 'per' must be a positive int, got 0"),
        ("helix_django.E011", "HELIX['MODEL_PRICES']['typo']: unknown keys ['cached']"),
    ]
    with override_settings(HELIX={"MODEL_PRICES": ["not", "a", "dict"]}):
        assert [m.id for m in check_settings() if m.id == "helix_django.E011"] == ["helix_django.E011"]


async def test_a_completed_runs_finish_chunk_snapshot_and_metrics_carry_its_cost(executor, session):
    settings = {**helix(default=agent({"PACE_TPS": 0})), "MODEL_PRICES": PRICES, "METRICS": True}
    with override_settings(HELIX=settings):
        before = await sync_to_async(scrape)()
        handle = await executor.execute(session, [user_message("Count me please")])
        assert await executor.wait(handle.run_id, 20) == "completed"
        after = await sync_to_async(scrape)()
        run = await Run.objects.aget(pk=handle.run_id)
        cost = run_cost("scripted-1", run.usage)
        snapshot = await abuild_snapshot(session.id)
    assert cost is not None and cost.amount > 0
    finish = [chunk for _, chunk in await stream_chunks(session.id) if chunk["type"] == "finish"]
    assert finish[-1]["messageMetadata"]["cost"] == cost.as_json()
    assert snapshot["runUsage"] == {**run.usage, "cost": cost.as_json()}
    added = value(after, "helix_cost_total", model="scripted-1", currency="USD") - value(
        before, "helix_cost_total", model="scripted-1", currency="USD"
    )
    assert added == pytest.approx(float(cost.amount))


async def test_an_unpriced_runs_finish_chunk_and_snapshot_carry_no_cost(executor, session, use_agents):
    use_agents(default=agent({"PACE_TPS": 0}))
    handle = await executor.execute(session, [user_message("Count me please")])
    assert await executor.wait(handle.run_id, 20) == "completed"
    finish = [chunk for _, chunk in await stream_chunks(session.id) if chunk["type"] == "finish"]
    assert "cost" not in finish[-1]["messageMetadata"]
    snapshot = await abuild_snapshot(session.id)
    assert snapshot["runUsage"] and "cost" not in snapshot["runUsage"]
