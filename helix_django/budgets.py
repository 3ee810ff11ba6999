"""Budgets: token and cost limits per user and site over a window, checked before a run starts.

Pluggable as DRF's throttles are: ``HELIX["BUDGET_CLASSES"]`` names the classes (import
strings), ``HELIX["BUDGET_RATES"]`` their rates by scope::

    HELIX = {
        "BUDGET_CLASSES": ["helix_django.budgets.UserTokenBudget", "helix_django.budgets.SiteTokenBudget"],
        "BUDGET_RATES": {"user": "200000/day", "site": "5000000/day"},
    }

The token classes read the durable usage of runs (``Run.usage``, :mod:`helix_django.usage`:
input plus output tokens, estimated ones included) started in the window, so a budget holds
across processes and restarts. The cost classes (``UserCostBudget``, scope ``user_cost``;
``SiteCostBudget``, scope ``site_cost``; rates ``"<amount> [<currency>]/<period>"``, e.g.
``"5.00/day"`` or ``"20 EUR/week"``, the currency ``USD`` by default) price that usage at
the runs' models' prices (``HELIX["MODEL_PRICES"]``, :mod:`helix_django.pricing`); runs of
a model without a price, or priced in another currency, cost them nothing. A start past a budget is refused with
:class:`~helix_django.errors.BudgetExceededError` (429 ``budget_exceeded``, ``Retry-After``)
before its run-start commit: nothing is stored, the model is never called. Every surface
that starts a run passes here (the chat route, the AI SDK route, the WebSocket, the
recovery actions, queued messages). A running agent loop is checked again between its
steps: past a budget it ends ``failed`` with that error, its partial answer kept.
"""

from __future__ import annotations

import abc
import math
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Min, Q, QuerySet
from django.utils import timezone

from helix_django.conf import helix_settings, import_from_setting
from helix_django.errors import BudgetExceededError
from helix_django.models import ChatSession, Run
from helix_django.orm import sync_to_async
from helix_django.pricing import CURRENCY_DEFAULT, run_cost
from helix_django.usage import token_sum

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _split_rate(rate: str, shape: str) -> tuple[str, int]:
    try:
        amount, period = str(rate).split("/")
        return amount.strip(), PERIODS[period.strip()[0]]
    except (ValueError, KeyError, IndexError) as exc:
        raise ImproperlyConfigured(f"HELIX['BUDGET_RATES'] rate {rate!r} is not {shape!r}") from exc


def parse_rate(rate: str) -> tuple[int, int]:
    """Return ``(tokens, window seconds)`` of a rate ``"<tokens>/<period>"`` (period: s, m, h, d, w or a word
    starting with one). Raises ImproperlyConfigured for anything else."""
    tokens, seconds = _split_rate(rate, "<tokens>/<period>")
    try:
        return int(tokens), seconds
    except ValueError as exc:
        raise ImproperlyConfigured(f"HELIX['BUDGET_RATES'] rate {rate!r} is not '<tokens>/<period>'") from exc


def parse_cost_rate(rate: str) -> tuple[Decimal, str, int]:
    """Return ``(amount, currency, window seconds)`` of a rate ``"<amount> [<currency>]/<period>"``.

    ``"5.00/day"`` is ``(Decimal("5.00"), "USD", 86400)``; ``"20 EUR/week"`` names its currency.
    Raises ImproperlyConfigured for anything else (a float-free decimal amount is required).
    """
    shape = "<amount> [<currency>]/<period>"
    text, seconds = _split_rate(rate, shape)
    amount, _, currency = text.partition(" ")
    try:
        limit = Decimal(amount)
    except InvalidOperation as exc:
        raise ImproperlyConfigured(f"HELIX['BUDGET_RATES'] rate {rate!r} is not {shape!r}") from exc
    if not limit.is_finite() or limit < 0:
        raise ImproperlyConfigured(f"HELIX['BUDGET_RATES'] rate {rate!r} is not {shape!r}")
    return limit, currency.strip() or CURRENCY_DEFAULT, seconds


class BaseBudget(abc.ABC):
    """A budget: whether a run of ``session`` may start now, and when it may if not."""

    scope = ""

    @abc.abstractmethod
    def allow(self, session: ChatSession) -> bool:
        """Return whether a run of ``session`` may start (sync: called on the ORM's thread)."""

    def wait(self) -> float | None:
        """Return the seconds until a refused start may be allowed, or None when unknown."""
        return None


class UsageBudget(BaseBudget):
    """At most ``BUDGET_RATES[scope]`` of what the runs :meth:`runs` selects used over the rate's window.

    The shared mechanism of the token and cost budgets: a subclass says how its rate reads
    (:meth:`parse`) and what the runs of the window spent (:meth:`spent`).
    """

    def __init__(self) -> None:
        rate = (helix_settings.BUDGET_RATES or {}).get(self.scope)
        self.limit: Any = 0
        self.window = 0
        if rate:
            self.limit, self.window = self.parse(rate)
        self.oldest: datetime | None = None

    @abc.abstractmethod
    def parse(self, rate: str) -> tuple[Any, int]:
        """Return ``(limit, window seconds)`` of ``rate``; raises ImproperlyConfigured."""

    @abc.abstractmethod
    def runs(self, session: ChatSession) -> Q | None:
        """Return the filter of the runs that count against ``session``'s budget (None: this budget does not apply)."""

    @abc.abstractmethod
    def spent(self, runs: QuerySet[Run]) -> tuple[Any, datetime | None]:
        """Return what ``runs`` (the counted runs of the window) spent and the oldest one's ``created_at``."""

    def allow(self, session: ChatSession) -> bool:
        """Allow a start while what the counted runs started in the window spent is below the limit."""
        selected = self.runs(session)
        if not self.limit or selected is None:
            return True
        since = timezone.now() - timedelta(seconds=self.window)
        amount, self.oldest = self.spent(Run.objects.filter(selected, created_at__gte=since))
        return bool(amount < self.limit)

    def wait(self) -> float | None:
        """Return the seconds until the oldest counted run leaves the window."""
        if self.oldest is None:
            return None
        return max(1.0, (self.oldest + timedelta(seconds=self.window) - timezone.now()).total_seconds())


class TokenBudget(UsageBudget):
    """At most ``BUDGET_RATES[scope]`` input plus output tokens (``"<tokens>/<period>"``) over the window."""

    def parse(self, rate: str) -> tuple[int, int]:
        """Return ``(tokens, window seconds)`` (:func:`parse_rate`)."""
        return parse_rate(rate)

    def spent(self, runs: QuerySet[Run]) -> tuple[int, datetime | None]:
        """Sum the input and output tokens of ``runs``, estimated ones included (one aggregate query)."""
        spent = runs.aggregate(tokens=token_sum("inputTokens") + token_sum("outputTokens"), oldest=Min("created_at"))
        return int(spent["tokens"] or 0), spent["oldest"]


class CostBudget(UsageBudget):
    """At most ``BUDGET_RATES[scope]`` of cost (``"<amount> [<currency>]/<period>"``) over the window."""

    currency = CURRENCY_DEFAULT

    def parse(self, rate: str) -> tuple[Decimal, int]:
        """Return ``(amount, window seconds)`` and set :attr:`currency` (:func:`parse_cost_rate`)."""
        limit, self.currency, seconds = parse_cost_rate(rate)
        return limit, seconds

    def spent(self, runs: QuerySet[Run]) -> tuple[Decimal, datetime | None]:
        """Price the tokens of ``runs`` per model in :attr:`currency` (one aggregate query grouped by model)."""
        grouped = runs.values("model").annotate(
            input=token_sum("inputTokens"),
            output=token_sum("outputTokens"),
            cached=token_sum("cachedTokens"),
            oldest=Min("created_at"),
        )
        total, oldest = Decimal(0), None
        for row in grouped.order_by():
            usage = {"inputTokens": row["input"], "outputTokens": row["output"], "cachedTokens": row["cached"]}
            cost = run_cost(row["model"], usage)
            if cost is not None and cost.currency == self.currency:
                total += cost.amount
            oldest = row["oldest"] if oldest is None else min(oldest, row["oldest"])
        return total, oldest


def user_runs(session: ChatSession) -> Q | None:
    """Return the runs of the session owner's sessions (an anonymous visitor's: of their owner token's)."""
    if session.owner_id is not None:
        return Q(session__owner_id=session.owner_id)
    if session.anonymous_key:
        return Q(session__anonymous_key=session.anonymous_key)
    return None


class UserTokenBudget(TokenBudget):
    """Tokens of the runs of the session owner's sessions (an anonymous visitor's: of their owner token's)."""

    scope = "user"

    def runs(self, session: ChatSession) -> Q | None:
        return user_runs(session)


class SiteTokenBudget(TokenBudget):
    """Tokens of every run of the site."""

    scope = "site"

    def runs(self, session: ChatSession) -> Q | None:
        return Q()


class UserCostBudget(CostBudget):
    """Cost of the runs of the session owner's sessions (an anonymous visitor's: of their owner token's)."""

    scope = "user_cost"

    def runs(self, session: ChatSession) -> Q | None:
        return user_runs(session)


class SiteCostBudget(CostBudget):
    """Cost of every run of the site."""

    scope = "site_cost"

    def runs(self, session: ChatSession) -> Q | None:
        return Q()


def check_budgets(session: ChatSession) -> None:
    """Refuse a run of ``session`` past any of ``HELIX["BUDGET_CLASSES"]``; call on the ORM's thread.

    Raises BudgetExceededError (``scope``, ``retryAfterSeconds``), ImproperlyConfigured for a
    class or rate that cannot be loaded.
    """
    for path in helix_settings.BUDGET_CLASSES or []:
        budget = import_from_setting(path, "HELIX['BUDGET_CLASSES']")()
        if not budget.allow(session):
            wait = budget.wait()
            extra = {"retryAfterSeconds": math.ceil(wait)} if wait is not None else {}
            raise BudgetExceededError(scope=budget.scope, **extra)


async def acheck_budgets(session: ChatSession) -> None:
    """:func:`check_budgets` on the ORM's thread; no thread hop at all when no budget is set."""
    if helix_settings.BUDGET_CLASSES:
        await sync_to_async(check_budgets)(session)


async def acheck_session_budgets(session_id: str) -> None:
    """:func:`check_budgets` of session ``session_id``, between the steps of its running agent loop.

    The run's committed steps count already (their usage is written with each step commit),
    so a loop that passed a budget ends before its next model call. Raises BudgetExceededError.
    """
    if helix_settings.BUDGET_CLASSES:
        await sync_to_async(_check_session_budgets)(session_id)


def _check_session_budgets(session_id: str) -> None:
    check_budgets(ChatSession.objects.get(pk=session_id))
