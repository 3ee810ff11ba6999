"""Cost: what a run's tokens cost, from the per-model price table ``HELIX["MODEL_PRICES"]``.

The table maps a model name (``Run.model``) to its prices, each a decimal string per ``per``
tokens (default one million), in ``currency`` (default ``"USD"``)::

    HELIX = {"MODEL_PRICES": {
        "gpt-4.1-mini": {"input": "0.40", "output": "1.60", "cached_input": "0.10",
                         "per": 1_000_000, "currency": "USD"},
    }}

``input`` and ``output`` are required; ``cached_input`` (the price of prompt tokens served
from the provider's cache) defaults to ``input``. Prices are strings, ints or Decimals,
never floats (a float is not the price it was written as). Check ``helix_django.E011``
reports a malformed table; a malformed entry prices nothing at run time.

The rule follows OpenAI's usage objects (``prompt_tokens`` includes ``cached_tokens``,
``completion_tokens`` includes ``reasoning_tokens``)::

    cost = ((inputTokens - cachedTokens) * input + cachedTokens * cached_input
            + outputTokens * output) / per

Estimated output tokens (:mod:`helix_django.usage`) are priced as output tokens, so a cost
is estimated exactly where its tokens are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from helix_django.conf import helix_settings

#: The default of an entry's ``per`` (prices per million tokens, as providers publish them).
PER_DEFAULT = 1_000_000
CURRENCY_DEFAULT = "USD"
#: Decimal places a cost is shown with (a short answer costs fractions of a cent).
SHOWN_PLACES = 6


@dataclasses.dataclass(frozen=True)
class Price:
    """One model's prices, per ``per`` tokens in ``currency``."""

    input: Decimal
    output: Decimal
    cached_input: Decimal
    per: int
    currency: str

    def cost(self, usage: dict[str, Any] | None) -> Decimal:
        """Return the cost of a ``Run.usage`` record (or a sum of records' token keys); 0 for none."""
        usage = usage or {}
        input_tokens = int(usage.get("inputTokens", 0))
        cached = min(int(usage.get("cachedTokens", 0)), input_tokens)
        output_tokens = int(usage.get("outputTokens", 0))
        total = (input_tokens - cached) * self.input + cached * self.cached_input + output_tokens * self.output
        return total / self.per


def _decimal(value: Any, name: str) -> Decimal:
    if isinstance(value, (float, bool)) or not isinstance(value, (str, int, Decimal)):
        raise ValueError(f"{name} must be a decimal string, got {value!r}")
    try:
        number = Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"{name} must be a decimal string, got {value!r}") from exc
    if not number.is_finite() or number < 0:
        raise ValueError(f"{name} must be a non-negative decimal, got {value!r}")
    return number


def parse_price(entry: Any) -> Price:
    """Return the :class:`Price` of one table entry; raises ValueError naming what is malformed."""
    if not isinstance(entry, dict):
        raise ValueError(f"an entry must be a dict, got {type(entry).__name__}")
    unknown = set(entry) - {"input", "output", "cached_input", "per", "currency"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    for key in ("input", "output"):
        if key not in entry:
            raise ValueError(f"{key!r} is missing")
    per = entry.get("per", PER_DEFAULT)
    if isinstance(per, bool) or not isinstance(per, int) or per <= 0:
        raise ValueError(f"'per' must be a positive int, got {per!r}")
    currency = entry.get("currency", CURRENCY_DEFAULT)
    if not isinstance(currency, str) or not currency:
        raise ValueError(f"'currency' must be a currency code, got {currency!r}")
    input_price = _decimal(entry["input"], "'input'")
    cached = _decimal(entry["cached_input"], "'cached_input'") if "cached_input" in entry else input_price
    return Price(input_price, _decimal(entry["output"], "'output'"), cached, per, currency)


def table_problems(table: Any) -> list[str]:
    """Return what is malformed in a ``MODEL_PRICES`` table, one line per problem ([] when it is well formed)."""
    if not isinstance(table, dict):
        return [f"HELIX['MODEL_PRICES'] must be a dict of model name to prices, got {type(table).__name__}"]
    problems = []
    for model, entry in table.items():
        try:
            parse_price(entry)
        except ValueError as exc:
            problems.append(f"HELIX['MODEL_PRICES'][{model!r}]: {exc}")
    return problems


def price_of(model: str) -> Price | None:
    """Return the price of ``model`` from ``HELIX["MODEL_PRICES"]``; None when it has none or it is malformed."""
    table = helix_settings.MODEL_PRICES
    if not isinstance(table, dict) or model not in table:
        return None
    try:
        return parse_price(table[model])
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class Cost:
    """An amount of money in one currency."""

    amount: Decimal
    currency: str

    def as_json(self) -> dict[str, str]:
        """Return ``{"amount": "<decimal string, no exponent>", "currency": "<code>"}`` (the wire and JSON shape)."""
        return {"amount": format(self.amount.normalize(), "f"), "currency": self.currency}


def run_cost(model: str, usage: dict[str, Any] | None) -> Cost | None:
    """Return what ``usage`` (a ``Run.usage`` record) of ``model`` cost; None when the model has no price."""
    price = price_of(model)
    if price is None or not usage:
        return None
    return Cost(price.cost(usage), price.currency)


def add_costs(costs: Iterable[Cost | None]) -> dict[str, Decimal]:
    """Return ``costs`` summed per currency (``{currency: amount}``), unpriced ones (None) left out."""
    totals: dict[str, Decimal] = {}
    for cost in costs:
        if cost is not None:
            totals[cost.currency] = totals.get(cost.currency, Decimal(0)) + cost.amount
    return totals


def format_costs(totals: dict[str, Decimal]) -> str:
    """Return ``{currency: amount}`` as "0.000416 USD", "1.20 USD" (at most six places, at least two;
    several currencies joined by " + "); "" for none."""
    shown = []
    for currency, amount in sorted(totals.items()):
        digits = f"{amount.quantize(Decimal(1).scaleb(-SHOWN_PLACES)):f}".rstrip("0")
        whole, _, places = digits.partition(".")
        shown.append(f"{whole}.{places.ljust(2, '0')} {currency}")
    return " + ".join(shown)
