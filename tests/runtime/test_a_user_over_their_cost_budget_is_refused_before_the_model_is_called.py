"""A cost budget (UserCostBudget, SiteCostBudget) refuses a run past it like a token budget does.

What counts is the runs' usage at their models' prices (HELIX["MODEL_PRICES"]): a start past
it is a 429 ``budget_exceeded`` with ``Retry-After`` that stores nothing; an agent loop past
it ends ``failed`` before its next model call. Runs of an unpriced model, or priced in
another currency than the rate's, cost the budget nothing.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from helix_django.budgets import check_budgets, parse_cost_rate
from helix_django.errors import BudgetExceededError
from helix_django.models import ChatSession, Run
from tests.recovery.factories import InFlight
from tests.runtime import toolbox
from tests.runtime.conftest import agent, helix, user_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

PRICES = {
    "scripted-1": {"input": "1", "output": "1", "per": 1000},
    "model-a": {"input": "10", "output": "10", "per": 1000},
    "model-eur": {"input": "100", "output": "100", "per": 1000, "currency": "EUR"},
}
USER = {"BUDGET_CLASSES": ["helix_django.budgets.UserCostBudget"], "MODEL_PRICES": PRICES}


def spend(session_id: str, model: str, tokens: int, owner=None) -> None:
    flight = InFlight(session_id, owner=owner)
    Run.objects.filter(pk=flight.run_id).update(
        status="interrupted", model=model, usage={"inputTokens": 0, "outputTokens": tokens, "source": "estimated"}
    )


def test_a_users_cost_budget_counts_their_priced_runs_in_its_currency(django_user_model):
    users = {name: (django_user_model.objects.create_user(f"{name}-cost", password="pw"),) for name in "ab"}
    spend("s-cost-a1", "model-a", 90, owner=users["a"][0])  # 0.90 USD
    spend("s-cost-a2", "unpriced", 10_000, owner=users["a"][0])  # costs nothing
    spend("s-cost-a3", "model-eur", 10_000, owner=users["a"][0])  # 1000 EUR: another currency
    spend("s-cost-b", "model-a", 500, owner=users["b"][0])  # another user's 5.00 USD
    session = ChatSession.objects.get(pk="s-cost-a1")
    with override_settings(HELIX={**USER, "BUDGET_RATES": {"user_cost": "1.00/day"}}):
        check_budgets(session)
        spend("s-cost-a4", "model-a", 10, owner=users["a"][0])  # 1.00 USD in all
        with pytest.raises(BudgetExceededError) as refused:
            check_budgets(session)
    body = refused.value.to_body()
    assert (body["code"], body["scope"]) == ("budget_exceeded", "user_cost")
    assert 3600 < body["retryAfterSeconds"] <= 86400
    with override_settings(HELIX={**USER, "BUDGET_RATES": {"user_cost": "1001 EUR/week"}}):
        check_budgets(session)  # 1000 EUR of 1001
        with override_settings(HELIX={**USER, "BUDGET_RATES": {"user_cost": "1000 EUR/week"}}):
            with pytest.raises(BudgetExceededError):
                check_budgets(session)


async def test_a_start_past_the_site_cost_budget_stores_nothing(executor, session):
    await sync_to_async(spend)("s-cost-site", "model-a", 200)  # 2.00 USD
    settings = {
        **helix(default=agent({"PACE_TPS": 0})),
        "MODEL_PRICES": PRICES,
        "BUDGET_CLASSES": ["helix_django.budgets.SiteCostBudget"],
        "BUDGET_RATES": {"site_cost": "2.00/hour"},
    }
    with override_settings(HELIX=settings):
        with pytest.raises(BudgetExceededError) as refused:
            await executor.execute(session, [user_message("Hello")])
    assert refused.value.to_body()["scope"] == "site_cost"
    assert await Run.objects.filter(session_id=session.id).acount() == 0
    with override_settings(HELIX={**settings, "BUDGET_RATES": {"site_cost": "2.01/hour"}}):
        handle = await executor.execute(session, [user_message("Hello")])
        assert await executor.wait(handle.run_id, 10) == "completed"


async def test_a_loop_past_the_cost_budget_ends_before_its_next_model_call(executor, session, settings):
    steps = [
        {"TEXT": "Let me look. ", "TOOL_CALLS": [{"id": "call-1", "name": "lookup", "arguments": {"city": "Oslo"}}]},
        {"TEXT": "It is mild in Oslo."},
    ]
    settings.HELIX = {
        **helix(default=agent({"STEPS": steps}, tools=[f"{toolbox.PATH}.lookup"])),
        "MODEL_PRICES": PRICES,
        "BUDGET_CLASSES": ["helix_django.budgets.SiteCostBudget"],
        "BUDGET_RATES": {"site_cost": "0.012/day"},  # the first call's 10 input tokens and a few output: past it
    }
    handle = await executor.execute(session, [user_message("Weather in Oslo?")])
    assert await executor.wait(handle.run_id, 10) == "failed"
    run = await Run.objects.aget(pk=handle.run_id)
    assert (run.error_code, run.usage["inputTokens"]) == ("budget_exceeded", 10)


def test_cost_rates_read_as_amount_currency_and_period():
    assert parse_cost_rate("5.00/day") == (Decimal("5.00"), "USD", 86400)
    assert parse_cost_rate("20 EUR/week") == (Decimal("20"), "EUR", 7 * 86400)
    for bad in ("lots/day", "5", "5/fortnight", "-1/day", "NaN/day"):
        with pytest.raises(ImproperlyConfigured):
            parse_cost_rate(bad)
