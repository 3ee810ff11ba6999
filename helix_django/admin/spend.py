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
from django.db.models import BooleanField, Case, Count, Value, When
from django.db.models.functions import TruncDate

from helix_django.models import Run, RunStatus
from helix_django.pricing import add_costs, format_costs, run_cost
from helix_django.usage import token_sum

#: Users listed under "Top users".
TOP_USERS = 5
#: Days listed under "Spend per day", today (UTC) included.
DAYS = 14
#: The endings whose spend the per-day table shows apart: the answers nobody got whole.
CUT_ENDINGS = (RunStatus.INTERRUPTED, RunStatus.CANCELLED)


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
    cut: SpendRow | None = None
    """The part of the row spent by runs that ended interrupted or cancelled (per-day rows)."""

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


def _sums() -> list[Any]:
    return [0, 0, 0, 0, []]  # runs, input, output, estimated, costs


def _add(line: list[Any], row: dict[str, Any]) -> None:
    usage = {"inputTokens": row["input"], "outputTokens": row["output"], "cachedTokens": row["cached"]}
    line[0] += row["n"]
    line[1] += row["input"]
    line[2] += row["output"]
    line[3] += row["estimated"]
    line[4].append(run_cost(row["model"], usage))


def _row(key: Any, line: list[Any], cut: SpendRow | None = None) -> SpendRow:
    n, tokens_in, tokens_out, estimated, costs = line
    return SpendRow(_label(key), n, tokens_in, tokens_out, estimated, add_costs(costs), cut)


def _rows(runs: Any, field: str, *, with_cut: bool = False) -> list[tuple[Any, SpendRow]]:
    """Group ``runs`` by ``field`` (and model, for the price): one aggregate query; the largest total first.

    ``with_cut``: each row also carries the part spent by interrupted and cancelled runs (``cut``).
    """
    fields = [field] if field == "model" else [field, "model"]
    if with_cut:
        is_cut = Case(When(status__in=CUT_ENDINGS, then=Value(True)), default=Value(False), output_field=BooleanField())
        runs = runs.annotate(is_cut=is_cut)
        fields.append("is_cut")
    grouped = runs.values(*fields).annotate(
        n=Count("id"),
        input=token_sum("inputTokens"),
        output=token_sum("outputTokens"),
        estimated=token_sum("estimatedTokens"),
        cached=token_sum("cachedTokens"),
    )
    sums: dict[Any, list[Any]] = {}
    cuts: dict[Any, list[Any]] = {}
    for row in grouped.order_by():
        _add(sums.setdefault(row[field], _sums()), row)
        if with_cut and row["is_cut"]:
            _add(cuts.setdefault(row[field], _sums()), row)
    rows = [
        (key, _row(key, line, _row(key, cuts.get(key, _sums())) if with_cut else None)) for key, line in sums.items()
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

    Every run started that day counts, whatever its ending; each row's ``cut`` is the part
    spent by runs that ended interrupted or cancelled. A day without runs is a row of zeros.
    One aggregate query, grouped by day (``TruncDate`` in UTC, on SQLite and PostgreSQL alike),
    model (for the cost) and whether the run ended interrupted or cancelled. A site
    without time zones (``USE_TZ = False``) stores local times: its days are local days.
    """
    utc = timezone.utc if settings.USE_TZ else None
    today = now.astimezone(utc).date() if utc else now.date()
    first = today - timedelta(days=days - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=utc)
    runs = Run.objects.filter(created_at__gte=since).annotate(day=TruncDate("created_at", tzinfo=utc))
    found = dict(_rows(runs, "day", with_cut=True))
    dates = [today - timedelta(days=back) for back in range(days)]
    empty = SpendRow("", 0, 0, 0, 0)
    return [found.get(day) or SpendRow(day.isoformat(), 0, 0, 0, 0, cut=empty) for day in dates]
