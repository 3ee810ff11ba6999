"""The run page, the session page and the dashboard show cost beside tokens (HELIX["MODEL_PRICES"])."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.admin.utils import quote
from django.test import override_settings
from django.urls import reverse

from helix_django.models import Run
from tests.recovery.factories import InFlight

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {
    "model-a": {"input": "2", "output": "10", "cached_input": "1", "per": 1000},
    "model-e": {"input": "1", "output": "1", "per": 1000, "currency": "EUR"},
}


@override_settings(HELIX={"MODEL_PRICES": PRICES})
def test_the_run_page_and_the_session_page_show_cost(staff_client):
    priced = InFlight("s-price")
    Run.objects.filter(pk=priced.run_id).update(
        status="completed", model="model-a", usage={"inputTokens": 100, "cachedTokens": 50, "outputTokens": 20}
    )
    unpriced = InFlight("s-price")
    Run.objects.filter(pk=unpriced.run_id).update(model="model-z", usage={"inputTokens": 5, "outputTokens": 5})
    run_page = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(priced.run_id)]))
    assert "0.35 USD" in run_page.content.decode()  # (50 * 2 + 50 * 1 + 20 * 10) / 1000
    other_page = staff_client.get(reverse("admin:helix_django_run_change", args=[quote(unpriced.run_id)]))
    assert "USD" not in other_page.content.decode()
    session_page = staff_client.get(reverse("admin:helix_django_chatsession_change", args=["s-price"]))
    assert "0.35 USD (1 run unpriced)" in session_page.content.decode()


@override_settings(HELIX={"MODEL_PRICES": PRICES})
def test_the_dashboard_shows_cost_by_model_ending_and_user(staff_client, django_user_model):
    ada = django_user_model.objects.create_user("ada-payer", password="pw")
    flights = [InFlight("s-pay-1", owner=ada), InFlight("s-pay-2", owner=ada), InFlight("s-pay-3", owner=ada)]
    Run.objects.filter(pk=flights[0].run_id).update(
        status="completed", model="model-a", usage={"inputTokens": 1000, "outputTokens": 100}
    )
    Run.objects.filter(pk=flights[1].run_id).update(
        status="interrupted", model="model-e", usage={"inputTokens": 10, "outputTokens": 20, "estimatedTokens": 20}
    )
    Run.objects.filter(pk=flights[2].run_id).update(
        status="interrupted", model="model-a", usage={"inputTokens": 100, "outputTokens": 0}
    )
    page = staff_client.get(reverse("admin:helix_django_run_dashboard"))
    by_model, by_status, users = (rows for _, rows, _ in page.context["spend_tables"])
    assert {row.label: row.costs for row in by_model} == {
        "model-a": {"USD": Decimal("3.2")},
        "model-e": {"EUR": Decimal("0.03")},
    }
    assert {row.label: row.cost for row in by_status} == {"completed": "3.00 USD", "interrupted": "0.03 EUR + 0.20 USD"}
    assert [(row.label, row.cost) for row in users] == [("ada-payer", "0.03 EUR + 3.20 USD")]
    assert "3.20 USD" in page.content.decode()


@override_settings(HELIX={"MODEL_PRICES": PRICES})
def test_the_session_page_shows_each_attempts_tokens_and_cost(staff_client):
    first = InFlight("s-attempts")
    Run.objects.filter(pk=first.run_id).update(
        status="interrupted", model="model-a", usage={"inputTokens": 100, "outputTokens": 20}
    )
    second = InFlight("s-attempts")
    Run.objects.filter(pk=second.run_id).update(
        status="completed", attempt=2, model="model-a", usage={"inputTokens": 1000, "outputTokens": 300}
    )
    page = staff_client.get(reverse("admin:helix_django_chatsession_change", args=["s-attempts"])).content.decode()
    assert "0.40 USD" in page  # attempt 1: (100 * 2 + 20 * 10) / 1000
    assert "5.00 USD" in page  # attempt 2: (1000 * 2 + 300 * 10) / 1000
    assert "5.40 USD" in page  # the session's sum
    assert "100 in · 20 out" in page and "1000 in · 300 out" in page and "1100 in · 320 out" in page
