"""What the dashboard shows of usage: the tokens of the last 24 h by model, by ending, and the top users;
the tokens of each of the last days.

Read from ``Run.usage`` (:mod:`helix_django.usage`) with aggregate queries; estimated tokens
are counted and shown apart, so support sees what interrupted and cancelled runs cost too.
Each row's cost is its tokens at their models' prices (:mod:`helix_django.pricing`), summed
per currency; the queries group by model as well, since a price is per model.
"""

from __future__ import annotations

import dataclasses
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count
from django.db.models.functions import TruncDate

from helix_django.models import Run
from helix_django.pricing import add_costs, format_costs, run_cost
from helix_django.usage import token_sum

#: Users listed under "Top users".
TOP_USERS = 5
#: Days listed under "Spend per day", today (UTC) included.
DAYS = 14


@dataclasses.dataclass(frozen=True)
class SpendRow:
    """One line of a spend table: its label and the tokens of its runs."""

    label: str
    runs: int
    input_tokens: int
    output_tokens: int
    estimated_tokens: int
    costs: dict[str, Decimal] = dataclasses.field(default_factory=dict)
    """The cost of the priced runs, ``{currency: amount}`` (unpriced runs left out)."""

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> str:
        """The cost as shown, "0.000416 USD"; "—" when no run of the row is priced."""
        return format_costs(self.costs) or "—"


def _label(key: Any) -> str:
    return key.isoformat() if isinstance(key, date) else str(key or "—")


def _rows(runs: Any, field: str) -> list[tuple[Any, SpendRow]]:
    fields = [field] if field == "model" else [field, "model"]
    grouped = runs.values(*fields).annotate(
        n=Count("id"),
        input=token_sum("inputTokens"),
        output=token_sum("outputTokens"),
        estimated=token_sum("estimatedTokens"),
        cached=token_sum("cachedTokens"),
    )
    sums: dict[Any, list[Any]] = {}
    for row in grouped.order_by():
        usage = {"inputTokens": row["input"], "outputTokens": row["output"], "cachedTokens": row["cached"]}
        line = sums.setdefault(row[field], [0, 0, 0, 0, []])
        line[0] += row["n"]
        line[1] += row["input"]
        line[2] += row["output"]
        line[3] += row["estimated"]
        line[4].append(run_cost(row["model"], usage))
    rows = [
        (key, SpendRow(_label(key), n, tokens_in, tokens_out, estimated, add_costs(costs)))
        for key, (n, tokens_in, tokens_out, estimated, costs) in sums.items()
    ]
    return sorted(rows, key=lambda pair: -pair[1].total)


def spend(since: datetime) -> dict[str, list[SpendRow]]:
    """Return ``{by_model, by_status, top_users}`` of the runs started since ``since`` (a few aggregate queries)."""
    runs = Run.objects.filter(created_at__gte=since)
    users = [(owner, row) for owner, row in _rows(runs, "session__owner") if owner is not None][:TOP_USERS]
    User = get_user_model()
    names = {user.pk: str(user) for user in User.objects.filter(pk__in=[owner for owner, _ in users])}
    return {
        "by_model": [row for _, row in _rows(runs, "model")],
        "by_status": [row for _, row in _rows(runs, "status")],
        "top_users": [dataclasses.replace(row, label=names.get(owner, str(owner))) for owner, row in users],
    }


def spend_per_day(now: datetime, days: int = DAYS) -> list[SpendRow]:
    """Return one row per UTC day of the last ``days`` (today included), newest first, labelled ``YYYY-MM-DD``.

    Every run started that day counts, whatever its ending (interrupted and cancelled ones
    included); a day without runs is a row of zeros. One aggregate query, grouped by day
    (``TruncDate`` in UTC, on SQLite and PostgreSQL alike) and model (for the cost). A site
    without time zones (``USE_TZ = False``) stores local times: its days are local days.
    """
    utc = timezone.utc if settings.USE_TZ else None
    today = now.astimezone(utc).date() if utc else now.date()
    first = today - timedelta(days=days - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=utc)
    runs = Run.objects.filter(created_at__gte=since).annotate(day=TruncDate("created_at", tzinfo=utc))
    found = dict(_rows(runs, "day"))
    dates = [today - timedelta(days=back) for back in range(days)]
    return [found.get(day) or SpendRow(day.isoformat(), 0, 0, 0, 0) for day in dates]
