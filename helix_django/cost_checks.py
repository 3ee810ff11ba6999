"""System check of what costs are counted: agents whose runs no price or cost budget covers.

- ``helix_django.W009``: an agent of ``HELIX["AGENTS"]`` answers with a model that
  ``HELIX["MODEL_PRICES"]`` does not price while prices or a cost budget are set (its runs show
  no cost, and a cost budget of ``HELIX["BUDGET_CLASSES"]`` does not count them), or with a model
  priced in another currency than a cost budget's rate (that budget does not count them either).
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Warning, register
from django.core.exceptions import ImproperlyConfigured

from helix_django.budgets import CostBudget
from helix_django.conf import SettingImportError, helix_settings, import_from_setting
from helix_django.pricing import price_of


def _cost_budget_currencies() -> dict[str, str]:
    """Return ``{class path: currency}`` of the cost budgets of ``HELIX["BUDGET_CLASSES"]`` with a rate set.

    A class or rate that cannot be loaded is left to the budgets' own errors at run start.
    """
    currencies = {}
    for path in helix_settings.BUDGET_CLASSES or []:
        try:
            budget_class = import_from_setting(path, "HELIX['BUDGET_CLASSES']")
            if isinstance(budget_class, type) and issubclass(budget_class, CostBudget):
                budget = budget_class()  # parses its rate, setting its currency
                if budget.limit:
                    currencies[path] = budget.currency
        except (SettingImportError, ImproperlyConfigured):
            continue
    return currencies


def _agent_models() -> dict[str, str]:
    """Return ``{agent name: model}`` of ``HELIX["AGENTS"]`` (agents without a model left out)."""
    agents = helix_settings.AGENTS or {}
    return {
        name: str(agent.get("MODEL") or "")
        for name, agent in agents.items()
        if isinstance(agent, dict) and agent.get("MODEL")
    }


@register()
def check_unpriced_models(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W009 for each agent whose runs no price or cost budget covers (module docstring); ``[]`` otherwise.

    Nothing is checked when no price is set and no cost budget is configured.
    """
    budgets = _cost_budget_currencies()
    if not helix_settings.MODEL_PRICES and not budgets:
        return []
    messages: list[CheckMessage] = []
    for name, model in _agent_models().items():
        price = price_of(model)
        if price is None:
            problem = f"Agent {name!r} answers with model {model!r}, which HELIX['MODEL_PRICES'] does not price"
            counted = ": its runs show no cost"
            if budgets:
                counted += " and the cost budgets (" + ", ".join(budgets) + ") do not count them."
            messages.append(
                Warning(
                    problem + counted,
                    hint=f"Add {model!r} to HELIX['MODEL_PRICES'] (docs/configuration.md, MODEL_PRICES).",
                    id="helix_django.W009",
                )
            )
            continue
        others = [path for path, currency in budgets.items() if currency != price.currency]
        if others:
            messages.append(
                Warning(
                    f"Agent {name!r} answers with model {model!r}, priced in {price.currency}: the cost "
                    f"budgets {', '.join(others)} count another currency and do not count its runs.",
                    hint="Price the model in the budget's currency, or give the budget a rate in its currency.",
                    id="helix_django.W009",
                )
            )
    return messages
