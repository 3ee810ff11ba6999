"""Budgets: token limits per user and site over a window, checked before a run starts.

Pluggable as DRF's throttles are: ``HELIX["BUDGET_CLASSES"]`` names the classes (import
strings), ``HELIX["BUDGET_RATES"]`` their rates by scope::

    HELIX = {
        "BUDGET_CLASSES": ["helix_django.budgets.UserTokenBudget", "helix_django.budgets.SiteTokenBudget"],
        "BUDGET_RATES": {"user": "200000/day", "site": "5000000/day"},
    }

The default classes read the durable usage of runs (``Run.usage``, :mod:`helix_django.usage`:
input plus output tokens, estimated ones included) started in the window, so a budget holds
across processes and restarts. A start past a budget is refused with
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

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Min, Q
from django.utils import timezone

from helix_django.conf import helix_settings, import_from_setting
from helix_django.errors import BudgetExceededError
from helix_django.models import ChatSession, Run
from helix_django.orm import sync_to_async
from helix_django.usage import token_sum

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """Return ``(tokens, window seconds)`` of a rate ``"<tokens>/<period>"`` (period: s, m, h, d or a word
    starting with one). Raises ImproperlyConfigured for anything else."""
    try:
        tokens, period = str(rate).split("/")
        return int(tokens), PERIODS[period.strip()[0]]
    except (ValueError, KeyError, IndexError) as exc:
        raise ImproperlyConfigured(f"HELIX['BUDGET_RATES'] rate {rate!r} is not '<tokens>/<period>'") from exc


class BaseBudget(abc.ABC):
    """A budget: whether a run of ``session`` may start now, and when it may if not."""

    scope = ""

    @abc.abstractmethod
    def allow(self, session: ChatSession) -> bool:
        """Return whether a run of ``session`` may start (sync: called on the ORM's thread)."""

    def wait(self) -> float | None:
        """Return the seconds until a refused start may be allowed, or None when unknown."""
        return None


class TokenBudget(BaseBudget):
    """At most ``BUDGET_RATES[scope]`` tokens of the runs :meth:`runs` selects over the rate's window."""

    def __init__(self) -> None:
        rate = (helix_settings.BUDGET_RATES or {}).get(self.scope)
        self.limit, self.window = parse_rate(rate) if rate else (0, 0)
        self.oldest: datetime | None = None

    @abc.abstractmethod
    def runs(self, session: ChatSession) -> Q | None:
        """Return the filter of the runs that count against ``session``'s budget (None: this budget does not apply)."""

    def allow(self, session: ChatSession) -> bool:
        """Sum the input and output tokens of the counted runs started in the window; allow below the limit."""
        selected = self.runs(session)
        if not self.limit or selected is None:
            return True
        since = timezone.now() - timedelta(seconds=self.window)
        runs = Run.objects.filter(selected, created_at__gte=since)
        spent = runs.aggregate(tokens=token_sum("inputTokens") + token_sum("outputTokens"), oldest=Min("created_at"))
        self.oldest = spent["oldest"]
        return int(spent["tokens"] or 0) < self.limit

    def wait(self) -> float | None:
        """Return the seconds until the oldest counted run leaves the window."""
        if self.oldest is None:
            return None
        return max(1.0, (self.oldest + timedelta(seconds=self.window) - timezone.now()).total_seconds())


class UserTokenBudget(TokenBudget):
    """Tokens of the runs of the session owner's sessions (an anonymous visitor's: of their owner token's)."""

    scope = "user"

    def runs(self, session: ChatSession) -> Q | None:
        if session.owner_id is not None:
            return Q(session__owner_id=session.owner_id)
        if session.anonymous_key:
            return Q(session__anonymous_key=session.anonymous_key)
        return None


class SiteTokenBudget(TokenBudget):
    """Tokens of every run of the site."""

    scope = "site"

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
