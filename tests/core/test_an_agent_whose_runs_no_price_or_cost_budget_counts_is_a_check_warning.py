"""W009: an agent whose model no price covers, while prices or a cost budget are set, is named by `manage.py check`."""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from helix_django.cost_checks import check_unpriced_models

SCRIPTED = {"BACKEND": "helix_django.runtime.providers.scripted.ScriptedProvider"}
AGENTS = {"default": {"PROVIDER": SCRIPTED, "MODEL": "model-a"}, "cheap": {"PROVIDER": SCRIPTED, "MODEL": "model-z"}}
PRICES = {"model-a": {"input": "2", "output": "10", "per": 1000}}
COST_BUDGET = ["helix_django.budgets.UserCostBudget"]


def ids(messages):
    return [message.id for message in messages]


@override_settings(HELIX={"AGENTS": AGENTS, "MODEL_PRICES": PRICES})
def test_an_unpriced_agent_model_is_named_when_prices_are_set():
    messages = check_unpriced_models()
    assert ids(messages) == ["helix_django.W009"]
    assert "'cheap'" in messages[0].msg and "'model-z'" in messages[0].msg and "no cost" in messages[0].msg


@override_settings(HELIX={"AGENTS": AGENTS, "BUDGET_CLASSES": COST_BUDGET, "BUDGET_RATES": {"user_cost": "5.00/day"}})
def test_a_cost_budget_names_every_agent_whose_runs_it_cannot_count():
    messages = check_unpriced_models()
    assert ids(messages) == ["helix_django.W009", "helix_django.W009"]
    assert all("UserCostBudget" in message.msg for message in messages)


@override_settings(
    HELIX={
        "AGENTS": {"default": AGENTS["default"]},
        "MODEL_PRICES": PRICES,
        "BUDGET_CLASSES": COST_BUDGET,
        "BUDGET_RATES": {"user_cost": "20 EUR/week"},
    }
)
def test_a_model_priced_in_another_currency_than_the_cost_budget_is_named():
    messages = check_unpriced_models()
    assert ids(messages) == ["helix_django.W009"]
    assert "USD" in messages[0].msg and "another currency" in messages[0].msg


@override_settings(HELIX={"AGENTS": AGENTS})
def test_nothing_is_said_where_no_price_and_no_cost_budget_is_set():
    assert check_unpriced_models() == []


@override_settings(HELIX={"AGENTS": {"default": AGENTS["default"]}, "MODEL_PRICES": PRICES})
def test_every_agent_priced_is_silent_and_manage_py_check_runs_it():
    assert check_unpriced_models() == []
    with override_settings(HELIX={"AGENTS": AGENTS, "MODEL_PRICES": PRICES}):
        try:
            call_command("check", "--fail-level", "WARNING", verbosity=0)
        except SystemCheckError as exc:
            assert "helix_django.W009" in str(exc)
        else:
            raise AssertionError("manage.py check did not report W009")
